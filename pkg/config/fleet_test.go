package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fleetHead = "apiVersion: sriov-lane.io/v1alpha1\nkind: Fleet\n"

const fleetHosts = `hosts:
- node: sriov-host-1
  pfs: ["0000:3b:00.0", "0000:3b:00.1"]
- node: sriov-host-2
  pfs: ["0000:5e:00.0"]
`

func loadFleetText(t *testing.T, body string) (*Fleet, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadFleet(p)
}

// A fleet file with hosts only takes every default: the project's
// resource for whole PFs, two PFs a job.
func TestLoadFleetDefaults(t *testing.T) {
	f, err := loadFleetText(t, fleetHead+fleetHosts)
	if err != nil {
		t.Fatal(err)
	}
	if f.Resource() != "sriov-lane.io/pf" || f.Job.PFs != 2 || f.Namespace != DefaultFleetNamespace ||
		f.NetworkName != DefaultFleetNetworkName || f.Job.Image != FleetJobImagePlaceholder {
		t.Errorf("defaults: %+v", f)
	}
}

// Bad input is refused with the field it is in, before anything renders.
func TestLoadFleetRefuses(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"unknown field", fleetHead + fleetHosts + "job:\n  pf: 2\n", "unknown field(s) job.pf"},
		{"no hosts", fleetHead, "invalid hosts: none"},
		{"no PFs", fleetHead + "hosts:\n- node: a\n", "invalid hosts[0].pfs: none"},
		{"an interface name for a PF", fleetHead + "hosts:\n- node: a\n  pfs: [ens1f0]\n", `invalid hosts[0].pfs[0]: "ens1f0"`},
		{"a PF twice", fleetHead + "hosts:\n- node: a\n  pfs: [0000:3b:00.0, 0000:3b:00.0]\n", `invalid hosts[0].pfs[1]: "0000:3b:00.0" is listed twice`},
		{"a host twice", fleetHead + "hosts:\n- node: a\n  pfs: [0000:3b:00.0]\n- node: a\n  pfs: [0000:3b:00.1]\n", `invalid hosts[1].node: "a" is listed twice`},
		{"a job larger than every host", fleetHead + fleetHosts + "job:\n  pfs: 3\n", "invalid job.pfs: 3 PFs, and no host has more than 2"},
		{"a resource name the plugin refuses", fleetHead + fleetHosts + "resourceName: whole.pf\n", `invalid resourceName: "whole.pf"`},
		{"two documents", fleetHead + fleetHosts + "---\n" + fleetHead + fleetHosts, "a fleet file holds one document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadFleetText(t, c.body)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if !IsInvalid(err) {
				t.Errorf("%v is not bad input (exit 2)", err)
			}
		})
	}
}
