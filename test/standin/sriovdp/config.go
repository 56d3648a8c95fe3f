package main

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// Upstream facts cited below are from
// k8snetworkplumbingwg/sriov-network-device-plugin at v3.11.0.

// resourceConfList is config.json (pkg/types/types.go ResourceConfList).
type resourceConfList struct {
	ResourceList []resourceConfig `json:"resourceList"`
}

// resourceConfig is one pool (pkg/types/types.go ResourceConfig).
type resourceConfig struct {
	ResourcePrefix  string                       `json:"resourcePrefix,omitempty"`
	ResourceName    string                       `json:"resourceName"`
	DeviceType      string                       `json:"deviceType,omitempty"`
	ExcludeTopology bool                         `json:"excludeTopology,omitempty"`
	Selectors       *json.RawMessage             `json:"selectors,omitempty"`
	AdditionalInfo  map[string]map[string]string `json:"additionalInfo,omitempty"`

	selectors []*netSelector
}

// netSelector is pkg/types/types.go NetDeviceSelectors (DeviceSelectors,
// GenericPciDeviceSelectors, GenericNetDeviceSelectors and its own fields).
type netSelector struct {
	Vendors      []string `json:"vendors,omitempty"`
	Devices      []string `json:"devices,omitempty"`
	Drivers      []string `json:"drivers,omitempty"`
	PciAddresses []string `json:"pciAddresses,omitempty"`
	PfNames      []string `json:"pfNames,omitempty"`
	RootDevices  []string `json:"rootDevices,omitempty"`
	LinkTypes    []string `json:"linkTypes,omitempty"`
	// IsRdma has no JSON tag upstream: encoding/json matches "isRdma".
	IsRdma       bool
	AcpiIndexes  []string `json:"acpiIndexes,omitempty"`
	NeedVhostNet bool     `json:"needVhostNet,omitempty"`
	DDPProfiles  []string `json:"ddpProfiles,omitempty"`
	VdpaType     string   `json:"vdpaType,omitempty"`
	PKeys        []string `json:"pKeys,omitempty"`
}

// Device types (pkg/types/types.go).
const (
	netDeviceType    = "netDevice"
	acceleratorType  = "accelerator"
	auxNetDeviceType = "auxNetDevice"
)

// validResourceName is pkg/utils/utils.go ValidResourceName.
var validResourceName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// readConfig decodes config.json as cmd/sriovdp/manager.go readConfig does:
// plain json.Unmarshal (unknown keys ignored), deviceType defaulting to
// netDevice, an unknown deviceType failing the whole file, and a pool whose
// selectors do not decode left out with a warning. The stand-in refuses
// the device types it does not implement (accelerator, auxNetDevice) and
// needVhostNet, rather than serving them wrongly.
func readConfig(raw []byte, warnf func(string, ...any)) ([]*resourceConfig, error) {
	var list resourceConfList
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("error unmarshalling raw bytes %v please make sure the config is in json format", err)
	}
	var out []*resourceConfig
	for i := range list.ResourceList {
		rc := &list.ResourceList[i]
		switch rc.DeviceType {
		case "":
			rc.DeviceType = netDeviceType
		case netDeviceType:
		case acceleratorType, auxNetDeviceType:
			return nil, fmt.Errorf("resource %s: deviceType %q is not supported by the stand-in device plugin (netDevice only)", rc.ResourceName, rc.DeviceType)
		default:
			return nil, fmt.Errorf("unsupported deviceType:  %q", rc.DeviceType)
		}
		sels, err := parseObjectOrSlice(rc.Selectors)
		if err != nil {
			warnf("unable to get SelectorObj from selectors list for deviceType %s: %v (resource %s left out)", rc.DeviceType, err, rc.ResourceName)
			continue
		}
		for j, s := range sels {
			if s.NeedVhostNet {
				return nil, fmt.Errorf("resource %s: selectors[%d]: needVhostNet is not supported by the stand-in device plugin", rc.ResourceName, j)
			}
		}
		rc.selectors = sels
		out = append(out, rc)
	}
	return out, nil
}

// parseObjectOrSlice is pkg/factory/factory.go parseObjectOrSlice: one
// selector object, or a non-empty list of them. (Upstream dereferences a
// missing "selectors" and panics; the stand-in says so instead.)
func parseObjectOrSlice(raw *json.RawMessage) ([]*netSelector, error) {
	if raw == nil {
		return nil, fmt.Errorf("no selectors")
	}
	var one *netSelector
	if err := json.Unmarshal(*raw, &one); err == nil {
		if one == nil {
			return nil, fmt.Errorf("selectors is null")
		}
		return []*netSelector{one}, nil
	}
	var many []*netSelector
	if err := json.Unmarshal(*raw, &many); err != nil {
		return nil, fmt.Errorf("error unmarshalling selectors: %v", err)
	}
	if len(many) == 0 {
		return nil, fmt.Errorf("error, need at least one selector, got 0")
	}
	for _, s := range many {
		if s == nil {
			return nil, fmt.Errorf("a selector is null")
		}
	}
	return many, nil
}

// prefix is the pool's resource prefix: its own, or the plugin's
// --resource-prefix (pkg/factory/factory.go GetResourceServer).
func (rc *resourceConfig) prefix(defaultPrefix string) string {
	if rc.ResourcePrefix != "" {
		return rc.ResourcePrefix
	}
	return defaultPrefix
}

// validConfigs is cmd/sriovdp/manager.go validConfigs with
// netdevice/netDeviceProvider.go ValidConfig: a valid resourceName, unique
// "<prefix>/<name>", and no selector with both isRdma and vdpaType.
func validConfigs(list []*resourceConfig, defaultPrefix string) error {
	seen := map[string]bool{}
	for _, rc := range list {
		if !validResourceName.MatchString(rc.ResourceName) {
			return fmt.Errorf("resource name %q contains invalid characters", rc.ResourceName)
		}
		name := rc.prefix(defaultPrefix) + "/" + rc.ResourceName
		if seen[name] {
			return fmt.Errorf("resource name %q already exists", name)
		}
		seen[name] = true
		for _, s := range rc.selectors {
			if s.IsRdma && s.VdpaType != "" {
				return fmt.Errorf("invalid config: VdpaType and IsRdma are mutually exclusive options")
			}
		}
	}
	return nil
}
