package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// DPConfig is the SR-IOV network device plugin's config.json. The plugin's
// Go module is not served, so the schema is the project's own, written from
// k8snetworkplumbingwg/sriov-network-device-plugin pkg/types/types.go@v3.11.0
// (ResourceConfList, ResourceConfig and the selector structs).
type DPConfig struct {
	ResourceList []DPResource `json:"resourceList"`
}

// DPResource is one advertised resource pool (upstream ResourceConfig).
type DPResource struct {
	ResourceName   string `json:"resourceName"`
	ResourcePrefix string `json:"resourcePrefix,omitempty"`
	// DeviceType is netDevice (the plugin's default), accelerator or auxNetDevice.
	DeviceType      string      `json:"deviceType,omitempty"`
	ExcludeTopology bool        `json:"excludeTopology,omitempty"`
	Selectors       DPSelectors `json:"selectors"`
	// AdditionalInfo maps "*" (every device) or a PCI address to extra
	// key/values the plugin adds to the device info.
	AdditionalInfo map[string]map[string]string `json:"additionalInfo,omitempty"`
}

// DPSelectors are OR'ed: a device joins the pool if any selector matches.
// Upstream accepts a single object or a non-empty list
// (pkg/factory/factory.go parseObjectOrSlice@v3.11.0); the lane writes a list.
type DPSelectors []DPSelector

// UnmarshalJSON accepts an object or a non-empty list of objects, refusing
// unknown keys in either.
func (s *DPSelectors) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var one DPSelector
		if err := strictUnmarshal(b, &one); err != nil {
			return err
		}
		*s = DPSelectors{one}
		return nil
	}
	var many []DPSelector
	if err := strictUnmarshal(b, &many); err != nil {
		return err
	}
	if len(many) == 0 {
		return fmt.Errorf("selectors: an empty list selects nothing")
	}
	*s = many
	return nil
}

// DPSelector narrows the devices of a pool; all set fields must match. It
// is the union of upstream's selector structs; which fields a device type
// takes is checked by Validate.
type DPSelector struct {
	// DeviceSelectors (every device type).
	Vendors []string `json:"vendors,omitempty"`
	Devices []string `json:"devices,omitempty"`
	Drivers []string `json:"drivers,omitempty"`
	// GenericPciDeviceSelectors (netDevice, accelerator).
	PCIAddresses []string `json:"pciAddresses,omitempty"`
	// GenericNetDeviceSelectors (netDevice, auxNetDevice). PFNames takes
	// VF index lists: "ens1f0#0-3", "ens1f0#0,2-3".
	PFNames     []string `json:"pfNames,omitempty"`
	RootDevices []string `json:"rootDevices,omitempty"`
	LinkTypes   []string `json:"linkTypes,omitempty"`
	// IsRdma has no JSON tag upstream; Go matches "isRdma" to it
	// case-insensitively, as encoding/json does here.
	IsRdma       bool     `json:"isRdma,omitempty"`
	ACPIIndexes  []string `json:"acpiIndexes,omitempty"`
	NeedVhostNet bool     `json:"needVhostNet,omitempty"`
	// NetDeviceSelectors only.
	DDPProfiles []string `json:"ddpProfiles,omitempty"`
	VdpaType    string   `json:"vdpaType,omitempty"`
	PKeys       []string `json:"pKeys,omitempty"`
	// AuxNetDeviceSelectors only.
	AuxTypes []string `json:"auxTypes,omitempty"`
}

// Device types (pkg/types/types.go@v3.11.0).
const (
	DeviceTypeNetDevice    = "netDevice"
	DeviceTypeAccelerator  = "accelerator"
	DeviceTypeAuxNetDevice = "auxNetDevice"
)

// dpResourceNameRE is upstream's check of resourceName
// (pkg/utils/utils.go@v3.11.0).
var dpResourceNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// DevicePluginConfig builds the config for the lane: one pool of the VFs of
// the leased PFs (see devicePluginConfig for how they are selected).
func DevicePluginConfig(o Options) (DPConfig, error) {
	o, err := o.WithDefaults()
	if err != nil {
		return DPConfig{}, err
	}
	return devicePluginConfig(o), nil
}

// devicePluginConfig selects the VFs of the lane's PFs by PF name; vfio-pci
// lanes also by driver, netdevice lanes by nothing else. A netdevice lane's
// VFs are on whatever kernel driver their NIC has (iavf, ixgbevf, igbvf,
// mlx5_core, bnxt_en, qede, enic, ...), and any fixed list of them selects
// nothing on the NICs it leaves out. Reading the drivers from sysfs instead
// would make the objects depend on the host: `plan` renders them without
// touching hardware (its output is a reviewed golden file), and `up`,
// `repair` and `reset` would have to render the ConfigMap from VFs that
// exist at that moment. With no driver list the plugin does not filter by
// driver at all: sriov-network-device-plugin
// pkg/factory/factory.go@v3.11.0 FilterBySelector applies a selector only
// when its list is non-empty, and pkg/resources/deviceSelectors.go@v3.11.0
// pfNameSelector keeps the VFs whose PF netdev (physfn/net) is named. The
// lane leases its PFs exclusively and binds every one of their VFs itself,
// so the PF names alone select exactly the lane's VFs. What the driver list
// guarded is checked on the host instead: a VF with no driver would join no
// pool (pkg/netdevice/pciNetDevice.go@v3.11.0 NewPciNetDevice fails on
// utils.GetDriverName), so pkg/sriov fails `up` on it, and status and
// repair treat a netdevice VF on vfio-pci or no driver as degraded.
func devicePluginConfig(o Options) DPConfig {
	sel := DPSelector{PFNames: append([]string(nil), o.PFNames...)}
	if o.VFDriver != config.VFDriverNetdevice {
		sel.Drivers = []string{config.VFDriverVFIO}
	}
	return DPConfig{ResourceList: []DPResource{{
		ResourceName:   o.ResourceName,
		ResourcePrefix: o.ResourcePrefix,
		DeviceType:     DeviceTypeNetDevice,
		Selectors:      DPSelectors{sel},
	}}}
}

// Marshal renders the config as the plugin reads it (indented for humans
// reading the ConfigMap).
func (c DPConfig) Marshal() (string, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding device plugin config: %w", err)
	}
	return string(b), nil
}

// ParseDPConfig decodes and validates a config.json. It accepts every field
// the plugin accepts and refuses unknown ones, so a typo in a hand-edited
// config is caught here rather than ignored by the plugin.
func ParseDPConfig(data []byte) (DPConfig, error) {
	var c DPConfig
	if err := strictUnmarshal(data, &c); err != nil {
		return DPConfig{}, fmt.Errorf("decoding device plugin config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return DPConfig{}, err
	}
	return c, nil
}

// Validate refuses what the plugin would refuse (or silently ignore): bad
// resource names, duplicate pools, unknown device types, selector fields
// the device type does not have, and isRdma with vdpaType.
func (c DPConfig) Validate() error {
	seen := map[string]bool{}
	for i, r := range c.ResourceList {
		at := fmt.Sprintf("device plugin config: resourceList[%d] (%s)", i, r.ResourceName)
		if !dpResourceNameRE.MatchString(r.ResourceName) {
			return fmt.Errorf("%s: resourceName must match %s", at, dpResourceNameRE)
		}
		key := r.ResourcePrefix + "/" + r.ResourceName
		if seen[key] {
			return fmt.Errorf("%s: a second pool with the same prefix and name", at)
		}
		seen[key] = true
		if r.Selectors == nil {
			return fmt.Errorf("%s: selectors are required", at)
		}
		typ := r.DeviceType
		if typ == "" {
			typ = DeviceTypeNetDevice
		}
		allowed, ok := selectorFields[typ]
		if !ok {
			return fmt.Errorf("%s: deviceType %q: want %s, %s or %s", at, r.DeviceType, DeviceTypeNetDevice, DeviceTypeAccelerator, DeviceTypeAuxNetDevice)
		}
		for j, s := range r.Selectors {
			for _, f := range s.setFields() {
				if !slices.Contains(allowed, f) {
					return fmt.Errorf("%s: selectors[%d]: %s is not a selector of deviceType %s", at, j, f, typ)
				}
			}
			if s.IsRdma && s.VdpaType != "" {
				return fmt.Errorf("%s: selectors[%d]: isRdma and vdpaType exclude each other", at, j)
			}
			if s.VdpaType != "" && s.VdpaType != "virtio" && s.VdpaType != "vhost" {
				return fmt.Errorf("%s: selectors[%d]: vdpaType %q: want virtio or vhost", at, j, s.VdpaType)
			}
		}
	}
	return nil
}

// selectorFields are the JSON keys of each device type's selector struct
// (pkg/types/types.go@v3.11.0: NetDeviceSelectors, AccelDeviceSelectors,
// AuxNetDeviceSelectors).
var selectorFields = func() map[string][]string {
	generic := []string{"vendors", "devices", "drivers"}
	pci := []string{"pciAddresses"}
	net := []string{"pfNames", "rootDevices", "linkTypes", "isRdma", "acpiIndexes", "needVhostNet"}
	return map[string][]string{
		DeviceTypeNetDevice:    slices.Concat(generic, pci, net, []string{"ddpProfiles", "vdpaType", "pKeys"}),
		DeviceTypeAccelerator:  slices.Concat(generic, pci),
		DeviceTypeAuxNetDevice: slices.Concat(generic, net, []string{"auxTypes"}),
	}
}()

// setFields names the JSON keys s sets.
func (s DPSelector) setFields() []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(len(s.Vendors) > 0, "vendors")
	add(len(s.Devices) > 0, "devices")
	add(len(s.Drivers) > 0, "drivers")
	add(len(s.PCIAddresses) > 0, "pciAddresses")
	add(len(s.PFNames) > 0, "pfNames")
	add(len(s.RootDevices) > 0, "rootDevices")
	add(len(s.LinkTypes) > 0, "linkTypes")
	add(s.IsRdma, "isRdma")
	add(len(s.ACPIIndexes) > 0, "acpiIndexes")
	add(s.NeedVhostNet, "needVhostNet")
	add(len(s.DDPProfiles) > 0, "ddpProfiles")
	add(s.VdpaType != "", "vdpaType")
	add(len(s.PKeys) > 0, "pKeys")
	add(len(s.AuxTypes) > 0, "auxTypes")
	return out
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
