package vm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A kernel's accelerator comes from make test-env's probe (AccelFile), and
// a boot's Config.Accel and $SRIOV_LANE_KERNEL_ACCEL come before it.
func TestAccelFromProbe(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"vmlinuz", "modules/igb.ko"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	desc, _ := json.Marshal(Kernel{Name: "k", Vmlinuz: "vmlinuz", Modules: []string{"modules/igb.ko"}})
	if err := os.WriteFile(filepath.Join(dir, KernelFile), desc, 0o644); err != nil {
		t.Fatal(err)
	}
	accelOf := func(c Config) string {
		args := QEMUArgs(c, "i", "c", "r")
		i := slices.Index(args, "-accel")
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("no -accel in %q", args)
		}
		return args[i+1]
	}
	for _, tc := range []struct {
		probed, config, env, want string
	}{
		{"", "", "", "tcg"},    // never probed
		{"tcg", "", "", "tcg"}, // KVM failed here
		{"kvm", "", "", "kvm"},
		{"kvm", "", "tcg", "tcg"},
		{"kvm", "tcg", "", "tcg"},
		{"tcg", "kvm", "", "kvm"}, // the probe itself
	} {
		os.Remove(filepath.Join(dir, AccelFile))
		if tc.probed != "" {
			b, _ := json.Marshal(AccelProbe{Key: "q", Accel: tc.probed})
			if err := os.WriteFile(filepath.Join(dir, AccelFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv(AccelEnv, tc.env)
		k, err := ReadKernel(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := accelOf(Config{Kernel: k, Accel: tc.config}); got != tc.want {
			t.Errorf("probed %q, Config.Accel %q, $%s %q: -accel %s, want %s", tc.probed, tc.config, AccelEnv, tc.env, got, tc.want)
		}
	}
}
