package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// fakeModule writes an ELF object whose .modinfo section holds name= and
// depends=, as a kernel module's does, at dir/file (xz-compressed when
// file ends in .xz).
func fakeModule(t *testing.T, dir, file, name, depends string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "m.c")
	info := `__attribute__((section(".modinfo"), used)) static const char info[] = "license=GPL\0name=` + name + `\0depends=` + depends + `";` + "\n"
	if err := os.WriteFile(src, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	ko := filepath.Join(dir, strings.TrimSuffix(file, ".xz"))
	if err := os.MkdirAll(filepath.Dir(ko), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-c", "-o", ko, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v: %s", err, out)
	}
	if strings.HasSuffix(file, ".xz") {
		if out, err := exec.Command("xz", ko).CombinedOutput(); err != nil {
			t.Fatalf("xz: %v: %s", err, out)
		}
	}
}

// The modules come uncompressed, each after what it depends on, a shared
// dependency once, '-' and '_' as one, built-in ones skipped.
func TestModuleLoadOrder(t *testing.T) {
	for _, tool := range []string{"cc", "xz"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.SkipOrFail(t, "needs "+tool+" to make fake kernel modules")
		}
	}
	mods := t.TempDir()
	fakeModule(t, mods, "kernel/drivers/a/igb.ko.xz", "igb", "dca,i2c-algo-bit")
	fakeModule(t, mods, "kernel/drivers/dca/dca.ko.xz", "dca", "")
	fakeModule(t, mods, "kernel/drivers/i2c/i2c-algo-bit.ko", "i2c_algo_bit", "")
	fakeModule(t, mods, "kernel/drivers/vfio/pci/vfio-pci.ko", "vfio_pci", "vfio-pci-core,vfio")
	fakeModule(t, mods, "kernel/drivers/vfio/pci/vfio-pci-core.ko", "vfio_pci_core", "vfio,irqbypass")
	fakeModule(t, mods, "kernel/drivers/vfio/vfio.ko", "vfio", "")
	if err := os.WriteFile(filepath.Join(mods, "modules.builtin"), []byte("kernel/virt/lib/irqbypass.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "modules")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := moduleLoadOrder(context.Background(), mods, out, []string{"igb", "vfio_pci", "dca"})
	if err != nil {
		t.Fatal(err)
	}
	want := "modules/dca.ko modules/i2c-algo-bit.ko modules/igb.ko modules/vfio.ko modules/vfio-pci-core.ko modules/vfio-pci.ko"
	if strings.Join(got, " ") != want {
		t.Errorf("load order %v\nwant       %s", got, want)
	}
	deps, err := moduleDepends(filepath.Join(out, "igb.ko"))
	if err != nil || strings.Join(deps, ",") != "dca,i2c-algo-bit" {
		t.Errorf("igb.ko (decompressed) depends on %v, %v", deps, err)
	}
	if _, err := moduleLoadOrder(context.Background(), mods, out, []string{"veth"}); err == nil {
		t.Error("a module that is neither there nor built in was not an error")
	}
}
