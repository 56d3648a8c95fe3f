package sriov

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// QEMU's igb is told from a real 82576 by the subsystem IDs QEMU gives it,
// and a QEMU device the lane has no table for is still called emulated.
func TestEmulationOf(t *testing.T) {
	root := t.TempDir()
	mk := func(bdf string, attrs map[string]string) {
		dir := filepath.Join(root, "bus/pci/devices", bdf)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range attrs {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("0000:01:00.0", map[string]string{"vendor": "0x8086", "device": "0x10c9", "subsystem_vendor": "0x1af4", "subsystem_device": "0x1100"})
	mk("0000:02:00.0", map[string]string{"vendor": "0x8086", "device": "0x10c9", "subsystem_vendor": "0x8086", "subsystem_device": "0xa03c"})
	mk("0000:03:00.0", map[string]string{"vendor": "0x1b36", "device": "0x0010", "subsystem_vendor": "0x1af4", "subsystem_device": "0x1100"})
	mk("0000:04:00.0", map[string]string{"vendor": "0x15b3", "device": "0x1017"})
	s := Sysfs{Root: root}

	em := EmulationOf(s, "0000:01:00.0")
	if !em.Emulated || em.Emulation != "QEMU igb (Intel 82576)" {
		t.Fatalf("QEMU igb: %+v", em)
	}
	if !strings.Contains(strings.Join(em.EmulationLacks, "\n"), "VF link state") {
		t.Errorf("QEMU igb lacks list has no VF link state: %q", em.EmulationLacks)
	}
	if EmulationOf(s, "0000:02:00.0").Emulated {
		t.Error("a real 82576 (Intel subsystem IDs) called emulated")
	}
	if em := EmulationOf(s, "0000:03:00.0"); !em.Emulated || !strings.Contains(em.Emulation, "0x1b36:0x0010") || len(em.EmulationLacks) != 0 {
		t.Errorf("another QEMU device: %+v", em)
	}
	if EmulationOf(s, "0000:04:00.0").Emulated {
		t.Error("a device without subsystem IDs called emulated")
	}
}
