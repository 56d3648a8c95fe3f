package statedir

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Lanes that an earlier sriov-lane made are found, and torn down, by these
// very paths.
func TestLayoutIsStable(t *testing.T) {
	d := Dir("/var/lib/sriov-lane")
	l := d.Lane("sriov")
	for got, want := range map[string]string{
		d.Leases():                        "/var/lib/sriov-lane/leases",
		d.Cache():                         "/var/lib/sriov-lane/cache",
		d.HostSysctls():                   "/var/lib/sriov-lane/host-sysctls.json",
		d.HostSysctlsLock():               "/var/lib/sriov-lane/host-sysctls.lock",
		l.Path():                          "/var/lib/sriov-lane/lanes/sriov",
		l.Journal():                       "/var/lib/sriov-lane/lanes/sriov/journal.jsonl",
		l.SavedConfig():                   "/var/lib/sriov-lane/lanes/sriov/lane.yaml",
		l.Kubeconfig():                    "/var/lib/sriov-lane/lanes/sriov/kubeconfig",
		l.Baseline():                      "/var/lib/sriov-lane/lanes/sriov/baseline.json",
		l.Pin("k3d-sriov-agent-0"):        "/var/lib/sriov-lane/lanes/sriov/netns/k3d-sriov-agent-0",
		l.MachineID("k3d-sriov-server-0"): "/var/lib/sriov-lane/lanes/sriov/machine-id/k3d-sriov-server-0",
		l.Kubectl():                       "/var/lib/sriov-lane/lanes/sriov/bin/kubectl",
		l.Backup("/root/.kube/config"):    "/var/lib/sriov-lane/lanes/sriov/backup-root_.kube_config",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
	if !l.Holds(l.Kubeconfig()) || l.Holds("/var/lib/sriov-lane/lanes/sriov2/kubeconfig") || l.Holds(l.Path()) {
		t.Error("Holds must take exactly what lies inside the lane's directory")
	}
}

func TestLanesAreThoseWithAJournal(t *testing.T) {
	d := Dir(t.TempDir())
	for _, name := range []string{"b", "a", "empty"} {
		if err := os.MkdirAll(d.Lane(name).Path(), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"b", "a"} {
		if err := os.WriteFile(d.Lane(name).Journal(), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	names, err := d.Lanes()
	if err != nil || !reflect.DeepEqual(names, []string{"a", "b"}) {
		t.Fatalf("Lanes() = %v, %v", names, err)
	}
	if !d.Lane("a").HasJournal() || d.Lane("empty").HasJournal() || d.Lane("none").HasJournal() {
		t.Error("a lane exists exactly while its journal does")
	}
	if _, err := os.Stat(filepath.Join(string(d), "lanes")); err != nil {
		t.Fatal(err)
	}
}
