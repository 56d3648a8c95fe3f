package main

import (
	"reflect"
	"testing"
)

func TestParseFlagsTakesWhatTheProductAndK3dPass(t *testing.T) {
	f, err := parseFlags("server", []string{
		"--tls-san", "0.0.0.0", "--tls-san=k3d-x-server-0,extra.example",
		"--disable=traefik", "--flannel-backend", "none", "--disable-network-policy",
		"--cluster-cidr=10.42.0.0/16", "--service-cidr", "10.43.0.0/16", "--cluster-init",
		"--node-label=node-role.kubernetes.io/worker=worker", "--node-label", "sriov_capable=true,bare",
		"--node-taint=dedicated=x:NoSchedule",
		"--kubelet-arg=cpu-manager-policy=static", "--kubelet-arg", "fail-cgroupv1=false", "--https-listen-port", "7443",
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0.0.0.0", "k3d-x-server-0,extra.example"}; !reflect.DeepEqual(f.tlsSANs, want) {
		t.Errorf("tlsSANs = %v, want %v", f.tlsSANs, want)
	}
	if f.httpsPort != "7443" || f.flannelBackend != "none" || !f.disableNetworkPolicy || !f.clusterInit || !reflect.DeepEqual(f.clusterCIDRs, []string{"10.42.0.0/16"}) {
		t.Errorf("parsed %+v", f)
	}
	// k3s splits each item at its first "=" only.
	want := map[string]string{"node-role.kubernetes.io/worker": "worker", "sriov_capable": "true,bare"}
	if got := f.labels(); !reflect.DeepEqual(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
	if want := []string{"cpu-manager-policy=static", "fail-cgroupv1=false"}; !reflect.DeepEqual(f.kubeletArgs, want) {
		t.Errorf("kubeletArgs = %v, want %v", f.kubeletArgs, want)
	}
}

func TestParseFlagsRefusesWhatK3sWouldRefuse(t *testing.T) {
	for _, tc := range []struct {
		role string
		args []string
	}{
		{"server", []string{"--no-such-flag"}},
		{"server", []string{"--kubelet-args=x=y"}},
		{"server", []string{"positional"}},
		{"server", []string{"--cluster-cidr"}},
		{"server", []string{"--flannel-backend=vxlan"}},
		{"server", []string{"--cluster-cidr=10.42.0.0"}},
		{"agent", []string{"--disable=traefik"}},
		{"agent", []string{"--flannel-backend=none"}},
		{"server", []string{"--disable-network-policy=maybe"}},
	} {
		if _, err := parseFlags(tc.role, tc.args); err == nil {
			t.Errorf("k3s %s %q: accepted, want an error", tc.role, tc.args)
		}
	}
	if _, err := parseFlags("agent", []string{"--kubelet-arg=fail-cgroupv1=false", "--node-label=a=b", "-t", "tok", "-s", "https://x:6443"}); err != nil {
		t.Errorf("agent flags: %v", err)
	}
}
