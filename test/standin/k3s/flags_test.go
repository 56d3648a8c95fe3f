package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseFlagsKeepsWhatTheStandinUsesAndIgnoresTheRest(t *testing.T) {
	f := parseFlags([]string{
		"--tls-san", "0.0.0.0", "--tls-san=k3d-x-server-0,extra.example",
		"--disable=traefik", "--flannel-backend", "none", "--disable-network-policy",
		"--node-label=node-role.kubernetes.io/worker=worker", "--node-label", "sriov_capable=true,bare",
		"--kubelet-arg=cpu-manager-policy=static", "--https-listen-port", "7443",
	})
	if want := []string{"0.0.0.0", "k3d-x-server-0", "extra.example"}; !reflect.DeepEqual(f.tlsSANs, want) {
		t.Errorf("tlsSANs = %v, want %v", f.tlsSANs, want)
	}
	if f.httpsPort != "7443" {
		t.Errorf("httpsPort = %q", f.httpsPort)
	}
	want := map[string]string{"node-role.kubernetes.io/worker": "worker", "sriov_capable": "true", "bare": ""}
	if got := f.labels(); !reflect.DeepEqual(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
	if len(f.ignored) != 4 {
		t.Errorf("ignored = %q, want the 4 flags the stand-in has no use for", f.ignored)
	}
}

func TestFindSysfsRootPicksTheBindMountHoldingPCIDevices(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake sys")
	other := filepath.Join(dir, "other")
	for _, d := range []string{filepath.Join(fake, "bus", "pci", "devices"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	escaped := filepath.Join(dir, `fake\040sys`)
	mountinfo := filepath.Join(dir, "mountinfo")
	content := "" +
		"22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n" +
		"23 22 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
		"30 1 8:1 /x " + other + " rw - ext4 /dev/sda1 rw\n" +
		"31 1 8:1 /y " + escaped + " rw - ext4 /dev/sda1 rw\n"
	if err := os.WriteFile(mountinfo, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := findSysfsRoot(mountinfo)
	if err != nil || got != fake {
		t.Fatalf("findSysfsRoot = %q, %v; want %q", got, err, fake)
	}

	if err := os.WriteFile(mountinfo, []byte(content[:len(content)-len("31 1 8:1 /y "+escaped+" rw - ext4 /dev/sda1 rw\n")]), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findSysfsRoot(mountinfo); err != nil || got != "" {
		t.Fatalf("without the fake mount: %q, %v; want none", got, err)
	}
}
