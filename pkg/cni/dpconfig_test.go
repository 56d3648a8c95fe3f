package cni

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

func TestDevicePluginConfigRoundTrip(t *testing.T) {
	for _, drv := range []string{config.VFDriverVFIO, config.VFDriverNetdevice} {
		t.Run(drv, func(t *testing.T) {
			o := defaultTestOptions()
			o.VFDriver = drv
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
			// A netdevice lane names no driver: its VFs' kernel driver is
			// the NIC's (igbvf, bnxt_en, ...), and a list leaves some out.
			drivers, set := sel["drivers"]
			switch {
			case drv == config.VFDriverVFIO && !reflect.DeepEqual(drivers, []any{"vfio-pci"}):
				t.Errorf("drivers = %v, want [vfio-pci]", drivers)
			case drv == config.VFDriverNetdevice && set:
				t.Errorf("netdevice lane selects drivers %v: VFs of other NICs would join no pool", drivers)
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

// Every field sriov-network-device-plugin v3.11.0 accepts
// (pkg/types/types.go@v3.11.0) parses and survives a round trip, selectors
// may be an object or a list (pkg/factory/factory.go@v3.11.0), and what the
// plugin would refuse or ignore is refused with the field named.
func TestParseDPConfigFullSchema(t *testing.T) {
	in := `{"resourceList":[
	  {"resourceName":"net","resourcePrefix":"p.io","deviceType":"netDevice","excludeTopology":true,
	   "additionalInfo":{"*":{"k":"v"},"0000:40:10.0":{"k":"w"}},
	   "selectors":[{"vendors":["8086"],"devices":["154c"],"drivers":["iavf"],"pciAddresses":["0000:40:10.0"],
	     "pfNames":["ens1f0#0-3","ens1f1#0,2-3"],"rootDevices":["0000:40:00.0"],"linkTypes":["ether"],"IsRdma":true,
	     "acpiIndexes":["101"],"needVhostNet":true,"ddpProfiles":["GTP"],"pKeys":["0x1"]},
	    {"vdpaType":"vhost"}]},
	  {"resourceName":"accel","deviceType":"accelerator",
	   "selectors":{"vendors":["8086"],"devices":["0d5c"],"drivers":["vfio-pci"],"pciAddresses":["0000:b1:00.0"]}},
	  {"resourceName":"aux","deviceType":"auxNetDevice",
	   "selectors":[{"pfNames":["p0"],"auxTypes":["sf"],"linkTypes":["ether"]}]}]}`
	c, err := ParseDPConfig([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r := c.ResourceList[0]
	s := r.Selectors[0]
	if !r.ExcludeTopology || r.AdditionalInfo["*"]["k"] != "v" || !s.IsRdma || !s.NeedVhostNet || s.PFNames[1] != "ens1f1#0,2-3" ||
		s.RootDevices[0] != "0000:40:00.0" || s.ACPIIndexes[0] != "101" || s.DDPProfiles[0] != "GTP" || s.PKeys[0] != "0x1" || r.Selectors[1].VdpaType != "vhost" {
		t.Fatalf("netDevice fields lost: %+v", r)
	}
	if a := c.ResourceList[1].Selectors; len(a) != 1 || a[0].Devices[0] != "0d5c" {
		t.Fatalf("single selector object: %+v", a)
	}
	if x := c.ResourceList[2].Selectors[0]; x.AuxTypes[0] != "sf" {
		t.Fatalf("auxNetDevice fields lost: %+v", x)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ParseDPConfig([]byte(out))
	if err != nil || !reflect.DeepEqual(c, c2) {
		t.Fatalf("re-parse: %v, %+v", err, c2)
	}
	refused := map[string]string{
		`{"resourceList":[{"resourceName":"a","selectors":[{"pfname":["x"]}]}]}`:                                 "pfname",
		`{"resourceList":[{"resourceName":"a","selectors":[]}]}`:                                                 "empty list",
		`{"resourceList":[{"resourceName":"a"}]}`:                                                                "selectors are required",
		`{"resourceList":[{"resourceName":"a.b","selectors":{}}]}`:                                               "resourceName must match",
		`{"resourceList":[{"resourceName":"a","deviceType":"gpu","selectors":{}}]}`:                              `deviceType "gpu"`,
		`{"resourceList":[{"resourceName":"a","deviceType":"accelerator","selectors":{"pfNames":["p"]}}]}`:       "pfNames is not a selector of deviceType accelerator",
		`{"resourceList":[{"resourceName":"a","deviceType":"auxNetDevice","selectors":{"pciAddresses":["x"]}}]}`: "pciAddresses is not a selector",
		`{"resourceList":[{"resourceName":"a","selectors":{"isRdma":true,"vdpaType":"virtio"}}]}`:                "exclude each other",
		`{"resourceList":[{"resourceName":"a","selectors":{}},{"resourceName":"a","selectors":{}}]}`:             "same prefix and name",
	}
	for in, want := range refused {
		if _, err := ParseDPConfig([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error with %q", in, err, want)
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	cases := map[string]func(*Options){
		"no PFs":      func(o *Options) { o.PFNames = nil },
		"bad CNI":     func(o *Options) { o.CNI = "weave" },
		"plugin path": func(o *Options) { o.CNIPlugins = []string{"../../bin/sh"} },
		"bad mem":     func(o *Options) { o.MultusMemoryLimit = "lots" },
	}
	for name, mut := range cases {
		o := defaultTestOptions()
		mut(&o)
		if _, err := Objects(t.Context(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
