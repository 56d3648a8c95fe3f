package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Defaults of the topology manager, datastore-on-tmpfs and IP family
// settings: kind-sriov's where it has one.
func TestDefaultsTopologyTmpfsIPFamily(t *testing.T) {
	l := Default()
	if l.Kubelet.TopologyManagerPolicy != "single-numa-node" || l.Kubelet.TopologyManagerScope != "container" {
		t.Errorf("topology manager defaults %q/%q", l.Kubelet.TopologyManagerPolicy, l.Kubelet.TopologyManagerScope)
	}
	if !l.DatastoreOnTmpfs() || l.Server.DatastoreOnTmpfs == nil {
		t.Error("datastoreOnTmpfs does not default to true (kind-sriov keeps etcd in memory)")
	}
	if l.IPFamily != "ipv4" {
		t.Errorf("ipFamily defaults to %q", l.IPFamily)
	}
	b, err := Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ipFamily: ipv4", "topologyManagerPolicy: single-numa-node", "topologyManagerScope: container", "datastoreOnTmpfs: true"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("plan's config lacks %q:\n%s", want, b)
		}
	}
}

// Every refused value, with the field named, and every accepted one.
func TestValidateTopologyAndIPFamily(t *testing.T) {
	for _, tc := range []struct {
		set   func(*Lane)
		field string // "" = accepted
	}{
		{func(l *Lane) { l.Kubelet.TopologyManagerPolicy = "none" }, ""},
		{func(l *Lane) { l.Kubelet.TopologyManagerPolicy = "best-effort" }, ""},
		{func(l *Lane) { l.Kubelet.TopologyManagerPolicy = "restricted" }, ""},
		{func(l *Lane) { l.Kubelet.TopologyManagerPolicy = "single-numa-node" }, ""},
		{func(l *Lane) { l.Kubelet.TopologyManagerScope = "pod" }, ""},
		// kubelet ignores the scope under policy none: accepted.
		{func(l *Lane) { l.Kubelet.TopologyManagerPolicy, l.Kubelet.TopologyManagerScope = "none", "pod" }, ""},
		// kubelet ties the topology manager to no CPU manager policy.
		{func(l *Lane) {
			l.Kubelet.CPUManagerPolicy, l.Kubelet.TopologyManagerPolicy = "none", "single-numa-node"
		}, ""},
		{func(l *Lane) { l.Kubelet.TopologyManagerPolicy = "single-numa" }, "kubelet.topologyManagerPolicy"},
		{func(l *Lane) { l.Kubelet.TopologyManagerPolicy = "Restricted" }, "kubelet.topologyManagerPolicy"},
		{func(l *Lane) { l.Kubelet.TopologyManagerScope = "node" }, "kubelet.topologyManagerScope"},
		{func(l *Lane) { l.Kubelet.TopologyManagerScope = "Pod" }, "kubelet.topologyManagerScope"},
		{func(l *Lane) { l.IPFamily = "ipv6" }, ""},
		{func(l *Lane) { l.IPFamily = "dual" }, ""},
		{func(l *Lane) { l.IPFamily, l.CNI = "dual", CNICalico }, ""},
		{func(l *Lane) { l.IPFamily = "IPv6" }, "ipFamily"},
		{func(l *Lane) { l.IPFamily = "dualstack" }, "ipFamily"},
	} {
		l := Default()
		tc.set(l)
		err := Validate(l)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v/%q refused: %v", l.Kubelet, l.IPFamily, err)
		case tc.field != "" && (err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), "invalid "+tc.field+":")):
			t.Errorf("want an error naming %s, got %v", tc.field, err)
		}
	}
}

// The settings reach the lane from file, environment (kubevirtci's names
// included) and flags.
func TestLoadTopologyTmpfsIPFamily(t *testing.T) {
	p := writeFile(t, "apiVersion: sriov-lane.io/v1alpha1\nkind: Lane\nipFamily: dual\nkubelet:\n  topologyManagerPolicy: restricted\n  topologyManagerScope: pod\nserver:\n  datastoreOnTmpfs: false\n")
	l, err := Load(Source{File: p})
	if err != nil {
		t.Fatal(err)
	}
	if l.IPFamily != "dual" || l.Kubelet.TopologyManagerPolicy != "restricted" || l.Kubelet.TopologyManagerScope != "pod" || l.DatastoreOnTmpfs() {
		t.Fatalf("file not applied: %+v %+v %q", l.Kubelet, l.Server, l.IPFamily)
	}

	l, err = Load(Source{Getenv: env(map[string]string{
		"IPFAMILY": "ipv6", "KUBEVIRT_TOPOLOGY_MANAGER_POLICY": "best-effort", "KUBEVIRT_WITH_KIND_ETCD_IN_MEMORY": "false",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if l.IPFamily != "ipv6" || l.Kubelet.TopologyManagerPolicy != "best-effort" || l.DatastoreOnTmpfs() {
		t.Fatalf("kubevirtci environment not applied: %+v %+v %q", l.Kubelet, l.Server, l.IPFamily)
	}

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fl := AddFlags(fs)
	if err := fs.Parse([]string{"--ip-family=dual", "--topology-manager-policy=none", "--topology-manager-scope=pod", "--datastore-on-tmpfs=true"}); err != nil {
		t.Fatal(err)
	}
	l, err = Load(Source{File: p, Flags: fl, Getenv: env(map[string]string{"SRIOV_LANE_IP_FAMILY": "ipv6"})})
	if err != nil {
		t.Fatal(err)
	}
	if l.IPFamily != "dual" || l.Kubelet.TopologyManagerPolicy != "none" || l.Kubelet.TopologyManagerScope != "pod" || !l.DatastoreOnTmpfs() {
		t.Fatalf("flags not applied: %+v %+v %q", l.Kubelet, l.Server, l.IPFamily)
	}

	for env1, field := range map[string]string{
		"IPFAMILY": "ipFamily", "SRIOV_LANE_TOPOLOGY_MANAGER_SCOPE": "kubelet.topologyManagerScope",
		"KUBEVIRT_WITH_KIND_ETCD_IN_MEMORY": "server.datastoreOnTmpfs",
	} {
		_, err := Load(Source{Getenv: env(map[string]string{env1: "bogus"})})
		if err == nil || !IsInvalid(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s=bogus: want an invalid error naming %s, got %v", env1, field, err)
		}
	}
}
