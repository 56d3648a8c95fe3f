package cni

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DPConfig is the SR-IOV network device plugin's config.json. The plugin's
// Go module is not available, so the schema is the project's own, written
// from the plugin's documented format (field notes section 5).
type DPConfig struct {
	ResourceList []DPResource `json:"resourceList"`
}

// DPResource is one advertised resource pool.
type DPResource struct {
	ResourceName   string `json:"resourceName"`
	ResourcePrefix string `json:"resourcePrefix,omitempty"`
	// DeviceType is netDevice (the plugin's default), accelerator or auxNetDevice.
	DeviceType      string       `json:"deviceType,omitempty"`
	ExcludeTopology bool         `json:"excludeTopology,omitempty"`
	Selectors       []DPSelector `json:"selectors"`
}

// DPSelector narrows the devices of a pool; all set fields must match.
type DPSelector struct {
	Vendors      []string `json:"vendors,omitempty"`
	Devices      []string `json:"devices,omitempty"`
	Drivers      []string `json:"drivers,omitempty"`
	PCIAddresses []string `json:"pciAddresses,omitempty"`
	// PFNames accepts ranges of VF indices: "ens1f0#0-3".
	PFNames      []string `json:"pfNames,omitempty"`
	RootDevices  []string `json:"rootDevices,omitempty"`
	LinkTypes    []string `json:"linkTypes,omitempty"`
	IsRdma       bool     `json:"isRdma,omitempty"`
	NeedVhostNet bool     `json:"needVhostNet,omitempty"`
}

// Device types.
const DeviceTypeNetDevice = "netDevice"

// DevicePluginConfig builds the config for the lane: one pool of the VFs of
// the leased PFs, selected by the VF driver (vfio-pci, or the kernel VF
// drivers in netdevice mode).
func DevicePluginConfig(o Options) (DPConfig, error) {
	o, err := o.withDefaults()
	if err != nil {
		return DPConfig{}, err
	}
	return devicePluginConfig(o), nil
}

func devicePluginConfig(o Options) DPConfig {
	drivers := []string{VFDriverVFIO}
	if o.VFDriver == VFDriverNetdevice {
		drivers = append([]string(nil), o.NetdeviceDrivers...)
	}
	return DPConfig{ResourceList: []DPResource{{
		ResourceName:   o.ResourceName,
		ResourcePrefix: o.ResourcePrefix,
		DeviceType:     DeviceTypeNetDevice,
		Selectors: []DPSelector{{
			Drivers: drivers,
			PFNames: append([]string(nil), o.PFNames...),
		}},
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

// ParseDPConfig decodes a config.json, refusing unknown fields so a typo in
// a hand-edited config is caught here rather than ignored by the plugin.
func ParseDPConfig(data []byte) (DPConfig, error) {
	var c DPConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return DPConfig{}, fmt.Errorf("decoding device plugin config: %w", err)
	}
	return c, nil
}
