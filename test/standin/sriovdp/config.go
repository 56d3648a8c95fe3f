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
	// SelectorObjs has no JSON tag upstream either: a "selectorObjs" key
	// that is not a list fails the whole file there, and here.
	SelectorObjs []any

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
// plain json.Unmarshal (unknown keys ignored, keys matched
// case-insensitively), deviceType defaulting to netDevice, an unknown
// deviceType failing the whole file, and a pool whose selectors do not
// decode left out with a warning. A pool without "selectors" (or with
// "selectors": null) is a nil *json.RawMessage that upstream dereferences:
// the plugin panics, and so the stand-in ends as a panic does (exit 2).
// The stand-in refuses the device types it does not implement
// (accelerator, auxNetDevice) and needVhostNet, rather than serving them
// wrongly.
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
			return nil, &exit{code: 1, err: fmt.Errorf("resource %s: deviceType %q is not supported by the stand-in device plugin (netDevice only)", rc.ResourceName, rc.DeviceType)}
		default:
			return nil, fmt.Errorf("unsupported deviceType:  %q", rc.DeviceType)
		}
		if rc.Selectors == nil {
			return nil, panicked("resource %q has no selectors: upstream dereferences the nil *json.RawMessage (pkg/factory/factory.go parseObjectOrSlice)", rc.ResourceName)
		}
		sels, err := parseObjectOrSlice(*rc.Selectors)
		if err != nil {
			warnf("unable to get SelectorObj from selectors list:'%s' for deviceType: %s error: %s", *rc.Selectors, rc.DeviceType, err)
			continue
		}
		for j, s := range sels {
			if s != nil && s.NeedVhostNet {
				return nil, &exit{code: 1, err: fmt.Errorf("resource %s: selectors[%d]: needVhostNet is not supported by the stand-in device plugin", rc.ResourceName, j)}
			}
		}
		rc.selectors = sels
		out = append(out, rc)
	}
	return out, nil
}

// parseObjectOrSlice is pkg/factory/factory.go parseObjectOrSlice: one
// selector object, or a non-empty list of them. A JSON null, alone or in
// the list, decodes to a nil selector as upstream's does; validConfigs
// meets it first.
func parseObjectOrSlice(raw json.RawMessage) ([]*netSelector, error) {
	var one *netSelector
	if err := json.Unmarshal(raw, &one); err == nil {
		return []*netSelector{one}, nil
	}
	var many []*netSelector
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("error unmarshalling *types.NetDeviceSelectors bytes %v", err)
	}
	if len(many) == 0 {
		return nil, fmt.Errorf("error, need at least one selector, got 0")
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
// netdevice/netDeviceProvider.go ValidConfig, in their order: a valid
// resourceName, a unique "<prefix>/<name>", and then each selector, where
// a nil one (JSON null) is dereferenced (a panic upstream) and isRdma with
// vdpaType is refused. Upstream logs the reason and glog.Fatalf's: the
// errors are ends with exit status 2 (see exit).
func validConfigs(list []*resourceConfig, defaultPrefix string) error {
	const fatal = "Exiting.. one or more invalid configuration(s) given: "
	seen := map[string]bool{}
	for _, rc := range list {
		if !validResourceName.MatchString(rc.ResourceName) {
			return fatalf(fatal+"resource name %q contains invalid characters", rc.ResourceName)
		}
		name := rc.prefix(defaultPrefix) + "/" + rc.ResourceName
		if seen[name] {
			return fatalf(fatal+"resource name %q already exists", name)
		}
		for _, s := range rc.selectors {
			if s == nil {
				return panicked("resource %q has a null selector: upstream dereferences it (netdevice/netDeviceProvider.go ValidConfig)", rc.ResourceName)
			}
			if s.IsRdma && s.VdpaType != "" {
				return fatalf(fatal + "invalid config: VdpaType and IsRdma are mutually exclusive options")
			}
		}
		seen[name] = true
	}
	return nil
}
