package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// kvmProbeTimeout bounds a probe boot under KVM: one with nothing to run
// powers off within seconds, and a nested KVM that cannot run the guest
// stops it paused ("KVM internal error") rather than exiting.
const kvmProbeTimeout = 20 * time.Second

// ProbeKVM boots k under KVM with nothing to run and returns nil if it came
// up and powered off. These build machines have a /dev/kvm that opens, but
// nested KVM fails in the kernel's decompressor (an emulation failure on a
// VEX instruction), so only a boot tells.
func ProbeKVM(ctx context.Context, k Kernel) error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no usable /dev/kvm: %w", err)
	}
	f.Close()
	res, err := Start(ctx, Config{Kernel: k, PFs: 1, Timeout: kvmProbeTimeout, Accel: "kvm"})
	if err != nil {
		// The first line says why; the console tail is for a failed test.
		first, _, _ := strings.Cut(err.Error(), "\n")
		return errors.New(first)
	}
	for _, m := range res.Modules {
		if m.Error != "" {
			return fmt.Errorf("module %s: %s", m.Name, m.Error)
		}
	}
	return nil
}

// ProbeKey is what a probe's result depends on: QEMU's version and
// whether this host has /dev/kvm.
func ProbeKey(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, qemuBinary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", qemuBinary, err)
	}
	version, _, _ := strings.Cut(string(out), "\n")
	_, kvmErr := os.Stat("/dev/kvm")
	return fmt.Sprintf("%s; /dev/kvm %t", strings.TrimSpace(version), kvmErr == nil), nil
}
