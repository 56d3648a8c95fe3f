// Package devplugin stands in for the sriov-network-device-plugin's device
// selection: given its config and the links visible in a node's netns, it
// says which VFs each resource advertises. The device plugin stand-in
// (test/standin/sriovdp) serves them to kubelet. Its Go module is not
// available here, so the config schema is decoded by the project's own types.
package devplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DefaultResourcePrefix is upstream's default when a resource sets none.
const DefaultResourcePrefix = "intel.com"

// Config is the device plugin's config.json.
type Config struct {
	ResourceList []Resource `json:"resourceList"`
}

// Resource is one entry of resourceList.
type Resource struct {
	ResourceName   string    `json:"resourceName"`
	ResourcePrefix string    `json:"resourcePrefix,omitempty"`
	DeviceType     string    `json:"deviceType,omitempty"`
	Selectors      Selectors `json:"selectors"`
}

// Selector narrows devices; every non-empty field must match, and a
// device matches a resource if any of its selectors matches.
type Selector struct {
	Vendors      []string `json:"vendors,omitempty"`
	Devices      []string `json:"devices,omitempty"`
	Drivers      []string `json:"drivers,omitempty"`
	PFNames      []string `json:"pfNames,omitempty"`
	PCIAddresses []string `json:"pciAddresses,omitempty"`
}

// Selectors accepts the list form and the legacy single-object form.
type Selectors []Selector

func (s *Selectors) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '{':
		var one Selector
		if err := json.Unmarshal(b, &one); err != nil {
			return fmt.Errorf("decoding selectors object: %w", err)
		}
		*s = Selectors{one}
		return nil
	}
	var list []Selector
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("decoding selectors list: %w", err)
	}
	*s = list
	return nil
}

// ParseConfig decodes and checks a device plugin config.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decoding device plugin config: %w", err)
	}
	seen := map[string]bool{}
	for i, r := range c.ResourceList {
		if r.ResourceName == "" {
			return nil, fmt.Errorf("device plugin config: resourceList[%d] has no resourceName", i)
		}
		if r.DeviceType != "" && r.DeviceType != "netDevice" {
			return nil, fmt.Errorf("device plugin config: resource %s: deviceType %q is not supported by the stand-in (netDevice only)", r.ResourceName, r.DeviceType)
		}
		key := r.key()
		if seen[key] {
			return nil, fmt.Errorf("device plugin config: resource %s appears twice", key)
		}
		seen[key] = true
	}
	return &c, nil
}

func (r Resource) key() string { return r.Key(DefaultResourcePrefix) }

// Key is the resource's extended resource name: its resourcePrefix, or
// defaultPrefix (the device plugin's --resource-prefix) when it has none.
func (r Resource) Key(defaultPrefix string) string {
	p := r.ResourcePrefix
	if p == "" {
		p = defaultPrefix
	}
	return p + "/" + r.ResourceName
}
