package cni

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// The IP family reaches flannel's net-conf.json and Calico's Installation
// as the pinned upstream releases spell it.
func TestConformanceIPFamily(t *testing.T) {
	fl := "flannel-io/flannel pkg/subnet/config.go@v0.28.9"
	op := "tigera/operator pkg/controller/ippool/defaults.go@v1.42.3"
	var facts []fact
	for _, family := range []string{config.IPFamilyIPv4, config.IPFamilyDual, config.IPFamilyIPv6} {
		o := defaultTestOptions()
		o.IPFamily = family
		v := renderView(t, o)
		cm := v.configMap(flannelConfigMap)
		var raw map[string]any
		if err := json.Unmarshal([]byte(cm.Data["net-conf.json"]), &raw); err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint("EnableIPv4=", raw["EnableIPv4"], " Network=", raw["Network"], " EnableIPv6=", raw["EnableIPv6"], " IPv6Network=", raw["IPv6Network"])
		want := map[string]string{
			config.IPFamilyIPv4: "EnableIPv4=<nil> Network=10.42.0.0/16 EnableIPv6=<nil> IPv6Network=<nil>",
			config.IPFamilyDual: "EnableIPv4=<nil> Network=10.42.0.0/16 EnableIPv6=true IPv6Network=fd00:10:42::/56",
			config.IPFamilyIPv6: "EnableIPv4=false Network=<nil> EnableIPv6=true IPv6Network=fd00:10:42::/56",
		}[family]
		facts = append(facts, fact{fl, "flannel net-conf for " + family + " (EnableIPv4 defaults to true in ParseConfig)", got, want, ""})

		o.CNI = config.CNICalico
		v = renderView(t, o)
		inst := v.installation()
		pools, _, _ := unstructured.NestedSlice(inst.Object, "spec", "calicoNetwork", "ipPools")
		var names []string
		for _, p := range pools {
			m := p.(map[string]any)
			names = append(names, fmt.Sprint(m["name"], " ", m["cidr"], " /", m["blockSize"], " ", m["encapsulation"]))
		}
		wantPools := map[string]string{
			config.IPFamilyIPv4: "[default-ipv4-ippool 192.168.0.0/16 /26 VXLANCrossSubnet]",
			config.IPFamilyDual: "[default-ipv4-ippool 192.168.0.0/16 /26 VXLANCrossSubnet default-ipv6-ippool fd00:10:42::/56 /122 VXLANCrossSubnet]",
			config.IPFamilyIPv6: "[default-ipv6-ippool fd00:10:42::/56 /122 VXLANCrossSubnet]",
		}[family]
		facts = append(facts, fact{op, "Calico IP pools for " + family + " (IPv6 pool name and block size as the operator defaults them; VXLAN, since IPIP is refused on IPv6 pools)", fmt.Sprint(names), wantPools, ""})
	}
	checkFacts(t, facts)
}
