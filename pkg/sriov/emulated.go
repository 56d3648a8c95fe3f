package sriov

import "strings"

// EmulationReport says whether a hypervisor emulates a PF, which, and
// what a test suite on the lane must not expect of it. Every PF report
// embeds it (discovery and the hooks' SRIOV_LANE_PFS, check, status), so
// each says it with the same JSON fields.
type EmulationReport struct {
	Emulated bool `json:"emulated"`
	// Emulation names the emulation, e.g. "QEMU igb (Intel 82576)".
	Emulation string `json:"emulation,omitempty"`
	// EmulationLacks lists what the emulated NIC cannot do, for suites to
	// skip.
	EmulationLacks []string `json:"emulationLacks,omitempty"`
}

// qemuSubsystemVendor is the PCI subsystem vendor QEMU gives a device
// whose model sets none (Red Hat/Qumranet 0x1af4, subsystem 0x1100:
// pci_default_sub_vendor_id / pci_default_sub_device_id in qemu/qemu
// hw/pci/pci.c, PCI_SUBVENDOR_ID_REDHAT_QUMRANET and PCI_SUBDEVICE_ID_QEMU
// in include/hw/pci/pci_ids.h). QEMU's igb sets none (igb_class_init in
// qemu/qemu hw/net/igb.c sets vendor 0x8086, device E1000_DEV_ID_82576
// 0x10c9 only), and test/kernel/guest reads 0x1af4/0x1100 from sysfs on
// QEMU 10.0.2. A real 82576 carries its board maker's subsystem IDs.
const (
	qemuSubsystemVendor = "0x1af4"
	qemuSubsystemDevice = "0x1100"
)

// qemuIGBLacks is what a lane on QEMU's igb cannot give a test suite: the
// tests sriov-network-operator skips when CLUSTER_HAS_EMULATED_PF is set
// (k8snetworkplumbingwg/sriov-network-operator, all at v1.6.0:
// test/util/cluster/cluster.go VirtualCluster;
// test/conformance/tests/test_sriov_operator.go skips the VF link state
// test and test_policy_configuration.go the test of VF traffic while the
// PF is down, both "Bug in IGB driver", and test/util/network/network.go
// leaves a network's linkState unset on such a cluster;
// test_exporter_metrics.go skips the VF statistics, "IGB driver does not
// support VF statistics"; test_switchdev.go its suite, "IGB driver does
// not support switchdev driver model").
// test/kernel/guest asks the guest's igb (QEMU 10.0.2, kernels 6.1 and
// 6.12) and records the answers: a VF link state is refused (EOPNOTSUPP);
// spoof check, trust and a VF VLAN are taken; a VF max TX rate was refused
// (EINVAL) with the PF just set up, which igb does while its link is not
// at 1000 Mb/s, so it is not listed here.
var qemuIGBLacks = []string{
	"VF link state (ip link set PF vf N state auto|enable|disable)",
	"VF statistics (ip -s link show PF: vf N stats; metrics exporters)",
	"VF traffic while the PF link is down",
	"switchdev eswitch mode",
}

// EmulationOf says whether the PCI function at bdf is emulated by a
// hypervisor the lane knows, and what it lacks.
func EmulationOf(s Sysfs, bdf string) EmulationReport {
	subVendor, _ := s.ReadAttr(bdf, "subsystem_vendor")
	if !strings.EqualFold(subVendor, qemuSubsystemVendor) {
		return EmulationReport{}
	}
	subDevice, _ := s.ReadAttr(bdf, "subsystem_device")
	vendor, _ := s.ReadAttr(bdf, "vendor")
	device, _ := s.ReadAttr(bdf, "device")
	if strings.EqualFold(vendor, "0x8086") && strings.EqualFold(device, "0x10c9") && strings.EqualFold(subDevice, qemuSubsystemDevice) {
		return EmulationReport{Emulated: true, Emulation: "QEMU igb (Intel 82576)", EmulationLacks: append([]string(nil), qemuIGBLacks...)}
	}
	// Another device QEMU emulates with SR-IOV: known to be emulated, its
	// gaps not known here.
	return EmulationReport{Emulated: true, Emulation: "QEMU-emulated " + vendor + ":" + device}
}
