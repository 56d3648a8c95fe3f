package smoke

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	resourcev1 "k8s.io/api/resource/v1"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
)

// The checks `verify` runs on the smoke pod are pure functions of what the
// pod showed (command output, its network-status annotation); verify.go
// gathers those through the API server and runs them.

// Check names, as printed by `verify`.
const (
	CheckPodReady       = "pod Ready"
	CheckPCIDeviceEnv   = "PCIDEVICE env"
	CheckVFIODevice     = "vfio device"
	CheckNetworkStatus  = "network-status"
	CheckPodInterface   = "interface in pod"
	CheckDRAEnv         = "SRIOVNETWORK env"
	CheckClaim          = "resource claim"
	vfioContainerDevice = "/dev/vfio/vfio"
)

// CmdOutput is what one command run in the smoke pod printed, and how it
// ended.
type CmdOutput struct {
	Cmd            []string
	Stdout, Stderr string
	// Err is set when the command could not be run or exited non-zero
	// (a k8s.io/client-go/util/exec.ExitError then).
	Err error
}

// String describes the run for a failure message: the command, how it
// ended and what it printed.
func (o CmdOutput) String() string {
	cmd := "`" + strings.Join(o.Cmd, " ") + "`"
	var ee utilexec.ExitError
	switch {
	case o.Err == nil:
		cmd += " printed"
	case errors.As(o.Err, &ee):
		cmd += fmt.Sprintf(" exited %d", ee.ExitStatus())
	default:
		return fmt.Sprintf("%s could not run: %v", cmd, o.Err)
	}
	out := strings.TrimSpace(strings.TrimSpace(o.Stdout) + "\n" + strings.TrimSpace(o.Stderr))
	if out == "" {
		return cmd + " nothing"
	}
	return cmd + ": " + strings.ReplaceAll(out, "\n", " | ")
}

// CheckError says which check failed, what it expected and what it found.
type CheckError struct {
	Check, Expected, Found string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("check %q failed: expected %s; found %s", e.Check, e.Expected, e.Found)
}

// PCIDeviceEnvName is the variable the SR-IOV network device plugin sets in
// a container allocated devices of <prefix>/<name>:
// PCIDEVICE_<prefix>_<name> upper-cased with '.' as '_' (so
// PCIDEVICE_KUBEVIRT_IO_SRIOV_NET for kubevirt.io/sriov_net; a '-' stays),
// holding the allocated PCI addresses, comma-separated
// (k8snetworkplumbingwg/sriov-network-device-plugin
// pkg/resources/pool_stub.go@v3.11.0, GetEnvs). <that>_INFO holds JSON
// with each address's device info.
func PCIDeviceEnvName(prefix, name string) string {
	return strings.ToUpper(strings.ReplaceAll("PCIDEVICE_"+prefix+"_"+name, ".", "_"))
}

// pciAddressRE is a PCI address as sysfs names devices: domain:bus:dev.fn.
var pciAddressRE = regexp.MustCompile(`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// PCIDevice is the VF the device plugin told the container about.
type PCIDevice struct {
	// Env is the PCIDEVICE_* variable and Address the PCI address it holds.
	Env, Address string
	// VFIODev is the group device the component names for Address (the
	// device plugin's _INFO variable, the DRA driver's _VFIO_DEVICE one),
	// "" when it names none; VFIOFrom is that variable.
	VFIODev, VFIOFrom string
}

// checkPCIDeviceEnv finds variable name in the output of `env` and expects
// it to hold exactly one PCI address (the smoke pod requests one VF).
func checkPCIDeviceEnv(env CmdOutput, name string) (PCIDevice, string, error) {
	fail := func(found string) (PCIDevice, string, error) {
		return PCIDevice{}, "", &CheckError{Check: CheckPCIDeviceEnv, Expected: fmt.Sprintf("%s holding one PCI address", name), Found: found}
	}
	if env.Err != nil {
		return fail(env.String())
	}
	vars := parseEnv(env.Stdout)
	var others []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if strings.HasPrefix(k, "PCIDEVICE_") && k != name && k != name+"_INFO" {
			others = append(others, k+"="+vars[k])
		}
	}
	val, ok := vars[name]
	switch {
	case !ok && len(others) == 0:
		return fail("no PCIDEVICE_* variable in the container's environment (did the device plugin allocate the VF?)")
	case !ok:
		return fail("no " + name + "; other PCIDEVICE_* variables: " + strings.Join(others, ", "))
	case val == "":
		return fail(name + " empty")
	}
	addrs := strings.Split(val, ",")
	if len(addrs) != 1 {
		return fail(fmt.Sprintf("%s=%s: %d addresses", name, val, len(addrs)))
	}
	if !pciAddressRE.MatchString(addrs[0]) {
		return fail(fmt.Sprintf("%s=%s: not a PCI address (want domain:bus:device.function, e.g. 0000:3b:02.1)", name, val))
	}
	dev := PCIDevice{Env: name, Address: addrs[0]}
	line := fmt.Sprintf("%s=%s", name, dev.Address)
	// _INFO: {"<address>": {"<provider>": {"<key>": "<value>"}}}
	// (pool_stub.go@v3.11.0 GetEnvs; the vfio provider's keys "mount" and
	// "dev-mount", pkg/infoprovider/vfioInfoProvider.go@v3.11.0). Only a
	// hint for the vfio check: a missing or odd _INFO fails nothing.
	var info map[string]map[string]map[string]string
	if raw, ok := vars[name+"_INFO"]; ok && json.Unmarshal([]byte(raw), &info) == nil {
		dev.VFIODev, dev.VFIOFrom = info[dev.Address]["vfio"]["dev-mount"], name+"_INFO"
	}
	return dev, line, nil
}

// parseEnv reads the output of `env`: a variable a line, NAME=value.
func parseEnv(out string) map[string]string {
	vars := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), "="); ok {
			vars[k] = v
		}
	}
	return vars
}

// lsEntry is one line of `ls -l`: its type character and name.
type lsEntry struct {
	typ  byte
	name string
}

// parseLsLong reads busybox (or coreutils) `ls -l DIR` output: the mode's
// first character is the file type ('c' for a char device), the name is the
// last field.
func parseLsLong(out string) []lsEntry {
	var es []lsEntry
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] == "total" || len(f[0]) < 10 {
			continue
		}
		es = append(es, lsEntry{typ: f[0][0], name: f[len(f)-1]})
	}
	return es
}

// checkVFIODevices expects `ls -l /dev/vfio/` in the pod to show the VFIO
// container device and a group device /dev/vfio/<group>, both char
// devices; when the device plugin named the group (dev.VFIODev), that one.
// The plugin passes the group under its number whatever the host calls it
// (pkg/utils/utils.go@v3.11.0 GetVFIODeviceFile: container path
// /dev/vfio/<iommu group>, host path noiommu-<group> without an IOMMU).
func checkVFIODevices(ls CmdOutput, dev PCIDevice) (string, error) {
	want := "char devices /dev/vfio/<group> and " + vfioContainerDevice
	if dev.VFIODev != "" {
		want = fmt.Sprintf("char devices %s (named for %s by %s) and %s", dev.VFIODev, dev.Address, dev.VFIOFrom, vfioContainerDevice)
	}
	fail := func(found string) (string, error) {
		return "", &CheckError{Check: CheckVFIODevice, Expected: want, Found: found}
	}
	if ls.Err != nil {
		return fail(ls.String())
	}
	var groups, ctl, notChar []string
	for _, e := range parseLsLong(ls.Stdout) {
		path := "/dev/vfio/" + e.name
		isGroup := path != vfioContainerDevice && strings.Trim(e.name, "0123456789") == ""
		switch {
		case (isGroup || path == vfioContainerDevice) && e.typ != 'c':
			notChar = append(notChar, fmt.Sprintf("%s (type %q)", path, e.typ))
		case isGroup:
			groups = append(groups, path)
		case path == vfioContainerDevice:
			ctl = append(ctl, path)
		}
	}
	found := "char devices: none"
	if all := append(slices.Clone(groups), ctl...); len(all) > 0 {
		found = "char devices: " + strings.Join(all, ", ")
	}
	if len(notChar) > 0 {
		found += "; not char devices: " + strings.Join(notChar, ", ")
	}
	switch {
	case len(groups) == 0:
		return fail(found)
	case dev.VFIODev != "" && !slices.Contains(groups, dev.VFIODev):
		return fail(found)
	case len(ctl) == 0:
		return fail(found)
	}
	line := fmt.Sprintf("%s and %s are char devices", strings.Join(groups, ", "), vfioContainerDevice)
	if dev.VFIODev != "" {
		line += fmt.Sprintf(" (%s names %s for %s)", dev.VFIOFrom, dev.VFIODev, dev.Address)
	}
	return line, nil
}

// checkNetworkStatus expects Multus's network-status annotation (a JSON
// list of NetworkStatus, one per attachment, named <namespace>/<NAD name>:
// k8snetworkplumbingwg/multus-cni pkg/types/conf.go@v4.3.0 and
// pkg/multus/multus.go@v4.3.0 CreateNetworkStatuses) to list network with
// an interface, an address in subnet and PCI device-info naming dev's
// address: the VF the device plugin gave the container is the one sriov-cni
// moved into the pod.
func checkNetworkStatus(annotation, network string, dev PCIDevice, subnet netip.Prefix) (nadv1.NetworkStatus, string, error) {
	want := fmt.Sprintf("%s annotation listing %s with an interface, an address in %s and device-info pci-address %s (%s)",
		nadv1.NetworkStatusAnnot, network, subnet, dev.Address, dev.Env)
	fail := func(found string) (nadv1.NetworkStatus, string, error) {
		return nadv1.NetworkStatus{}, "", &CheckError{Check: CheckNetworkStatus, Expected: want, Found: found}
	}
	if strings.TrimSpace(annotation) == "" {
		return fail("no " + nadv1.NetworkStatusAnnot + " annotation (Multus attached no network)")
	}
	var sts []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(annotation), &sts); err != nil {
		return fail(fmt.Sprintf("an annotation that is not a network-status list (%v): %s", err, annotation))
	}
	var names []string
	var st *nadv1.NetworkStatus
	for i := range sts {
		names = append(names, fmt.Sprintf("%s on %q", sts[i].Name, sts[i].Interface))
		if sts[i].Name == network && (st == nil || st.Interface == "") {
			st = &sts[i]
		}
	}
	switch {
	case st == nil:
		return fail("networks " + strings.Join(names, ", "))
	case st.Interface == "":
		return fail(network + " without an interface")
	}
	found := fmt.Sprintf("%s on %s", network, st.Interface)
	di := st.DeviceInfo
	switch {
	case di == nil:
		return fail(found + " without device-info")
	case di.Type != nadv1.DeviceInfoTypePCI || di.Pci == nil:
		return fail(fmt.Sprintf("%s with device-info type %q", found, di.Type))
	case !strings.EqualFold(di.Pci.PciAddress, dev.Address):
		return fail(fmt.Sprintf("%s with device-info pci-address %q", found, di.Pci.PciAddress))
	}
	inSubnet := slices.ContainsFunc(st.IPs, func(s string) bool {
		a, err := netip.ParseAddr(s)
		return err == nil && subnet.Contains(a)
	})
	if !inSubnet {
		return fail(fmt.Sprintf("%s with ips %v", found, st.IPs))
	}
	mac := st.Mac
	if mac == "" {
		mac = "none"
	}
	line := fmt.Sprintf("%s on %s, mac %s, ips %s, device-info pci-address %s (= %s)",
		network, st.Interface, mac, strings.Join(st.IPs, ","), di.Pci.PciAddress, dev.Env)
	return *st, line, nil
}

// checkPodInterface expects st's interface inside the pod's network
// namespace: `cat /sys/class/net/<if>/address` prints the annotation's MAC
// (when it names one) and `ip -o addr show dev <if>` lists every address
// the annotation names.
func checkPodInterface(st nadv1.NetworkStatus, mac, addrs CmdOutput) (string, error) {
	want := fmt.Sprintf("interface %s in the pod's network namespace", st.Interface)
	if st.Mac != "" {
		want += " with mac " + st.Mac
	}
	want += " and addresses " + strings.Join(st.IPs, ",")
	fail := func(found string) (string, error) {
		return "", &CheckError{Check: CheckPodInterface, Expected: want, Found: found}
	}
	if mac.Err != nil {
		return fail(mac.String())
	}
	got := strings.TrimSpace(mac.Stdout)
	if st.Mac != "" && !strings.EqualFold(got, st.Mac) {
		return fail(fmt.Sprintf("%s with mac %q", st.Interface, got))
	}
	if addrs.Err != nil {
		return fail(addrs.String())
	}
	have := parseIPOAddr(addrs.Stdout, st.Interface)
	var missing bool
	for _, s := range st.IPs {
		a, err := netip.ParseAddr(s)
		missing = missing || err != nil || !slices.ContainsFunc(have, func(p netip.Prefix) bool { return p.Addr() == a })
	}
	hs := make([]string, 0, len(have))
	for _, p := range have {
		hs = append(hs, p.String())
	}
	if len(hs) == 0 {
		hs = []string{"none"}
	}
	if missing || len(st.IPs) == 0 {
		return fail(fmt.Sprintf("%s with mac %s and addresses %s", st.Interface, got, strings.Join(hs, ",")))
	}
	return fmt.Sprintf("%s in the pod's netns: mac %s, addresses %s", st.Interface, got, strings.Join(hs, ",")), nil
}

// parseIPOAddr reads `ip -o addr` lines ("3: net1    inet 10.56.217.2/24
// brd ... scope global net1\ ..."), busybox's or iproute2's, and returns
// the addresses of interface ifname.
func parseIPOAddr(out, ifname string) []netip.Prefix {
	var ps []netip.Prefix
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || strings.TrimSuffix(f[1], ":") != ifname && !strings.HasPrefix(f[1], ifname+"@") {
			continue
		}
		if f[2] != "inet" && f[2] != "inet6" {
			continue
		}
		if p, err := netip.ParsePrefix(f[3]); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// draPCIEnv is the DRA driver's variable of every PCI address prepared for
// the pod (k8snetworkplumbingwg/dra-driver-sriov
// pkg/cdi/cdi.go@14490e9d438b CreateGlobalPodSpecFile).
const draPCIEnv = "SRIOVNETWORK_PCI_ADDRESSES"

// checkDRADeviceEnv expects the DRA driver's SRIOVNETWORK_PCI_ADDRESSES
// to hold exactly one PCI address (the smoke pod claims one VF), and takes
// the group device its SRIOVNETWORK_<device>_VFIO_DEVICE names, if set
// (pkg/devicestate/state.go@14490e9d438b applyConfigOnDevice).
func checkDRADeviceEnv(env CmdOutput) (PCIDevice, string, error) {
	fail := func(found string) (PCIDevice, string, error) {
		return PCIDevice{}, "", &CheckError{Check: CheckDRAEnv, Expected: draPCIEnv + " holding one PCI address", Found: found}
	}
	if env.Err != nil {
		return fail(env.String())
	}
	vars := parseEnv(env.Stdout)
	val, ok := vars[draPCIEnv]
	switch {
	case !ok:
		return fail("no " + draPCIEnv + " in the container's environment (did the DRA driver prepare the claim?)")
	case strings.Count(val, ",") > 0 || !pciAddressRE.MatchString(val):
		return fail(fmt.Sprintf("%s=%s: not one PCI address", draPCIEnv, val))
	}
	dev := PCIDevice{Env: draPCIEnv, Address: val}
	vfio := "SRIOVNETWORK_" + strings.ReplaceAll(cni.DRADeviceName(val), "-", "_") + "_VFIO_DEVICE"
	if g, ok := vars[vfio]; ok {
		dev.VFIODev, dev.VFIOFrom = g, vfio
	}
	return dev, fmt.Sprintf("%s=%s", draPCIEnv, val), nil
}

// checkClaimDevice expects the pod's claim to be allocated exactly one
// device of the driver, the one the pod's environment names.
func checkClaimDevice(claim *resourcev1.ResourceClaim, driver string, dev PCIDevice) (string, error) {
	want := cni.DRADeviceName(dev.Address)
	fail := func(found string) (string, error) {
		return "", &CheckError{Check: CheckClaim, Expected: fmt.Sprintf("claim allocated device %s of %s", want, driver), Found: found}
	}
	if claim.Status.Allocation == nil {
		return fail(fmt.Sprintf("claim %s not allocated", claim.Name))
	}
	var got []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		got = append(got, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	rs := claim.Status.Allocation.Devices.Results
	if len(rs) != 1 || rs[0].Driver != driver || rs[0].Device != want {
		return fail(fmt.Sprintf("claim %s allocated %v", claim.Name, got))
	}
	return fmt.Sprintf("claim %s: device %s in pool %s", claim.Name, rs[0].Device, rs[0].Pool), nil
}

// checkDRAInterface expects the VF's interface (DRAInterface), which the driver names
// and its sriov-cni moves into the pod, with an address in subnet (the
// smoke NAD's host-local range); there is no Multus network-status to
// name the address.
func checkDRAInterface(subnet netip.Prefix, mac, addrs CmdOutput) (string, error) {
	ifname := DRAInterface
	st := nadv1.NetworkStatus{Interface: ifname}
	if addrs.Err == nil {
		for _, p := range parseIPOAddr(addrs.Stdout, ifname) {
			if subnet.Contains(p.Addr()) {
				st.IPs = []string{p.Addr().String()}
				break
			}
		}
	}
	if len(st.IPs) == 0 {
		found := "no address in " + subnet.String()
		if addrs.Err != nil {
			found = addrs.String()
		}
		return "", &CheckError{Check: CheckPodInterface, Expected: fmt.Sprintf("interface %s in the pod's network namespace with an address in %s", ifname, subnet), Found: found}
	}
	return checkPodInterface(st, mac, addrs)
}
