package vm

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// Kernel is a guest kernel that `make test-env` unpacked
// (bin/test-assets/kernels/<name>/kernel.json, written by `lane-rig env`'s
// kernels phase). In kernel.json, Vmlinuz and Modules are relative to the
// file's directory; Kernels makes them absolute.
type Kernel struct {
	Name    string   // e.g. "bookworm-6.1" / "bookworm-backports-6.12"
	Release string   // uname -r, e.g. 6.1.0-57-amd64
	Package string   // Debian package file it came from, e.g. linux-image-6.1.0-57-amd64_6.1.158-1_amd64.deb
	Vmlinuz string   // absolute path
	Modules []string // absolute paths of uncompressed .ko files, in load order
	// Accel is "kvm" when make test-env booted this kernel under KVM on
	// this host (AccelFile), else "" (TCG).
	Accel string `json:"-"`
}

// AccelFile is the file, beside KernelFile, that records what ProbeKVM
// found on this host.
const AccelFile = "accel.json"

// AccelProbe is AccelFile's content: the accelerator that boots the
// kernel here, and the key of what it was probed with (QEMU's version,
// /dev/kvm), so a changed host is probed again.
type AccelProbe struct {
	Key, Accel, Why string
}

// KernelFile is the name of a kernel's description in its directory.
const KernelFile = "kernel.json"

// Kernels reads every kernel under <assets>/kernels, sorted by name.
func Kernels(assets string) ([]Kernel, error) {
	files, err := filepath.Glob(filepath.Join(assets, "kernels", "*", KernelFile))
	if err != nil {
		return nil, err
	}
	var ks []Kernel
	for _, f := range files {
		k, err := readKernel(f)
		if err != nil {
			return nil, err
		}
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks, nil
}

// ReadKernel reads the kernel described in dir (its KernelFile).
func ReadKernel(dir string) (Kernel, error) { return readKernel(filepath.Join(dir, KernelFile)) }

func readKernel(file string) (Kernel, error) {
	var k Kernel
	b, err := os.ReadFile(file)
	if err != nil {
		return k, err
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("%s: %w", file, err)
	}
	dir := filepath.Dir(file)
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if b, err := os.ReadFile(filepath.Join(dir, AccelFile)); err == nil {
		var p AccelProbe
		if json.Unmarshal(b, &p) == nil && p.Accel == "kvm" {
			k.Accel = p.Accel
		}
	}
	k.Vmlinuz = abs(k.Vmlinuz)
	for i, m := range k.Modules {
		k.Modules[i] = abs(m)
	}
	for _, p := range append([]string{k.Vmlinuz}, k.Modules...) {
		if _, err := os.Stat(p); err != nil {
			return k, fmt.Errorf("kernel %s (%s): %w", k.Name, file, err)
		}
	}
	return k, nil
}

// qemuBinary is the QEMU that boots the guests.
const qemuBinary = "qemu-system-x86_64"

// QEMUHasIGB reports whether the installed QEMU has the igb device (Intel
// 82576, with SR-IOV): QEMU 8.0 added it, so bookworm's 7.2 lacks it and
// bookworm-backports' 10.0 has it (qemu/qemu docs/system/devices/igb.rst@v8.0.0).
func QEMUHasIGB() error {
	out, err := exec.Command(qemuBinary, "-device", "help").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -device help: %w (install qemu-system-x86 from bookworm-backports: `make test-env`)", qemuBinary, err)
	}
	if !strings.Contains(string(out), `"igb"`) {
		return fmt.Errorf("%s has no igb device (bookworm's QEMU 7.2 lacks it; `make test-env` installs bookworm-backports')", qemuBinary)
	}
	return nil
}

// RequireKernels returns the kernels of $SRIOV_LANE_TEST_ASSETS, skipping
// (or failing under SRIOV_LANE_TEST_STRICT=1) when there are none or QEMU
// lacks the igb device.
func RequireKernels(t testing.TB) []Kernel {
	t.Helper()
	assets := testutil.RequireEnvPath(t, "SRIOV_LANE_TEST_ASSETS", "the test assets of `make test-env` (the guest kernels)")
	if err := QEMUHasIGB(); err != nil {
		testutil.SkipOrFail(t, "needs QEMU with igb: "+err.Error())
	}
	ks, err := Kernels(assets)
	if err != nil {
		testutil.SkipOrFail(t, "needs the guest kernels of `make test-env`: "+err.Error())
	}
	if len(ks) == 0 {
		testutil.SkipOrFail(t, "needs the guest kernels of `make test-env`: none under "+filepath.Join(assets, "kernels"))
	}
	return ks
}
