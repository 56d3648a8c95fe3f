package cni

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDevicePluginConfigRoundTrip(t *testing.T) {
	for _, drv := range []string{VFDriverVFIO, VFDriverNetdevice} {
		t.Run(drv, func(t *testing.T) {
			o := defaultTestOptions()
			o.VFDriver = drv
			o.NetdeviceDrivers = []string{"iavf", "mlx5_core"}
			cfg, err := DevicePluginConfig(o)
			if err != nil {
				t.Fatal(err)
			}
			text, err := cfg.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseDPConfig([]byte(text))
			if err != nil {
				t.Fatalf("parsing our own output: %v\n%s", err, text)
			}
			if !reflect.DeepEqual(cfg, back) {
				t.Fatalf("round trip changed the config:\nbefore %+v\nafter  %+v", cfg, back)
			}
			// The plugin reads these exact keys; check them on the wire.
			var raw map[string][]map[string]any
			if err := json.Unmarshal([]byte(text), &raw); err != nil {
				t.Fatal(err)
			}
			res := raw["resourceList"]
			if len(res) != 1 || res[0]["resourceName"] != "sriov_net" || res[0]["resourcePrefix"] != "kubevirt.io" {
				t.Fatalf("resourceList on the wire: %v", raw)
			}
			sel := res[0]["selectors"].([]any)[0].(map[string]any)
			wantDrivers := []any{"vfio-pci"}
			if drv == VFDriverNetdevice {
				wantDrivers = []any{"iavf", "mlx5_core"}
			}
			if !reflect.DeepEqual(sel["drivers"], wantDrivers) {
				t.Errorf("drivers = %v, want %v", sel["drivers"], wantDrivers)
			}
			if !reflect.DeepEqual(sel["pfNames"], []any{"ens1f0", "ens1f1"}) {
				t.Errorf("pfNames = %v", sel["pfNames"])
			}
			if _, ok := sel["isRdma"]; ok {
				t.Errorf("unset isRdma written: %v", sel)
			}
		})
	}
}

func TestParseDPConfigFullSchema(t *testing.T) {
	in := `{"resourceList":[{"resourceName":"a","resourcePrefix":"p.io","deviceType":"accelerator","excludeTopology":true,
	  "selectors":[{"vendors":["8086"],"devices":["154c"],"drivers":["vfio-pci"],"pciAddresses":["0000:40:10.0"],
	  "pfNames":["ens1f0#0-3"],"rootDevices":["0000:40:00.0"],"linkTypes":["ether"],"isRdma":true,"needVhostNet":true}]}]}`
	c, err := ParseDPConfig([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	s := c.ResourceList[0].Selectors[0]
	if !c.ResourceList[0].ExcludeTopology || !s.IsRdma || !s.NeedVhostNet || s.PFNames[0] != "ens1f0#0-3" || s.RootDevices[0] != "0000:40:00.0" || s.LinkTypes[0] != "ether" {
		t.Fatalf("fields lost: %+v", c)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ParseDPConfig([]byte(out))
	if err != nil || !reflect.DeepEqual(c, c2) {
		t.Fatalf("re-parse: %v, %+v", err, c2)
	}
	if _, err := ParseDPConfig([]byte(`{"resourceList":[{"resourceName":"a","selectors":[{"pfname":["x"]}]}]}`)); err == nil || !strings.Contains(err.Error(), "pfname") {
		t.Fatalf("misspelt key accepted: %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	cases := map[string]func(*Options){
		"no PFs":         func(o *Options) { o.PFNames = nil },
		"bad CNI":        func(o *Options) { o.CNI = "weave" },
		"bad driver":     func(o *Options) { o.VFDriver = "igb_uio" },
		"no prefix":      func(o *Options) { o.ResourcePrefix = "" },
		"no label":       func(o *Options) { o.NodeSelectorKey = "" },
		"bad cidr":       func(o *Options) { o.ClusterCIDR = "10.42.0.0" },
		"plugin path":    func(o *Options) { o.CNIPlugins = []string{"../../bin/sh"} },
		"bad mem":        func(o *Options) { o.MultusMemoryLimit = "lots" },
		"bad name chars": func(o *Options) { o.ResourceName = "a/b" },
	}
	for name, mut := range cases {
		o := defaultTestOptions()
		mut(&o)
		if _, err := Objects(t.Context(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
