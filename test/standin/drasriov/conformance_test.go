package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/sriov-lane/sriov-lane/test/standin/conformance"
)

// Conformance: each input the product passes, or could pass, to
// dra-driver-sriov (its environment, what sysfs shows it, the policies,
// the claims' configs), with what the driver at 14490e9d438b does with it,
// read at the commit (git show 14490e9d438b:PATH), and the stand-in doing
// that. A row with a deviation says how and why the stand-in differs.
type row = conformance.Row

const (
	drv       = "k8snetworkplumbingwg/dra-driver-sriov "
	at        = "@14490e9d438b"
	mainGo    = drv + "cmd/dra-driver-sriov/main.go" + at
	discovery = drv + "pkg/devicestate/discovery.go" + at
	hostGo    = drv + "pkg/host/host.go" + at
	stateGo   = drv + "pkg/devicestate/state.go" + at
	helpers   = drv + "pkg/devicestate/statehelpers.go" + at
	apiGo     = drv + "pkg/api/virtualfunction/v1alpha1/api.go" + at
	policyGo  = drv + "pkg/controller/resourcepolicycontroller.go" + at
	cdiGo     = drv + "pkg/cdi/cdi.go" + at
)

// sysTree lays out a kernel-shaped sysfs under a temporary directory: one
// PF (0000:3b:00.0, netdev pfname, Intel 82576 0x10c9) with VFs
// 0000:3b:10.0 and 0000:3b:10.2 (device 0x10ca) in IOMMU groups 40 and 41,
// and a network function with no netdev.
func sysTree(t *testing.T, pfNetdev bool) string {
	t.Helper()
	root := t.TempDir()
	w := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	fn := func(addr, device string) {
		d := "devices/pci0000:3a/0000:3a:00.0/" + addr
		w(d+"/class", "0x020000")
		w(d+"/vendor", "0x8086")
		w(d+"/device", device)
		w(d+"/numa_node", "0")
		ln("../../../"+d, "bus/pci/devices/"+addr)
	}
	fn("0000:3b:00.0", "0x10c9")
	fn("0000:3b:00.1", "0x10c9")
	for i, vf := range []string{"0000:3b:10.0", "0000:3b:10.2"} {
		fn(vf, "0x10ca")
		d := "devices/pci0000:3a/0000:3a:00.0/"
		ln("../"+"0000:3b:00.0", d+vf+"/physfn")
		ln("../"+vf, d+"0000:3b:00.0/virtfn"+fmt.Sprint(i))
		w(fmt.Sprintf("kernel/iommu_groups/%d/type", 40+i), "DMA")
		ln(fmt.Sprintf("../../../../kernel/iommu_groups/%d", 40+i), d+vf+"/iommu_group")
	}
	if pfNetdev {
		w("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/pfname/type", "1")
		w("class/net/pfname/type", "1")
	}
	return root
}

func attrString(d resourceapi.Device) string {
	var out []string
	for k, a := range d.Attributes {
		v := ""
		switch {
		case a.StringValue != nil:
			v = *a.StringValue
		case a.IntValue != nil:
			v = fmt.Sprint(*a.IntValue)
		case a.BoolValue != nil:
			v = fmt.Sprint(*a.BoolValue)
		}
		out = append(out, string(k)+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func discovered(t *testing.T, pfNetdev bool) string {
	devs, err := discover(sysTree(t, pfNetdev))
	if err != nil {
		return err.Error()
	}
	var names []string
	for n := range devs {
		names = append(names, n+"("+devs[n].pci+")")
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

func policy(name, spec string) namedPolicy {
	p := namedPolicy{name: name}
	if err := json.Unmarshal([]byte(spec), &p.spec); err != nil {
		panic(err)
	}
	return p
}

func published(t *testing.T, labels map[string]string, ps ...namedPolicy) string {
	devs, err := discover(sysTree(t, true))
	if err != nil {
		t.Fatal(err)
	}
	list, err := advertised(devs, ps, labels)
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, d := range list {
		names = append(names, d.Name)
	}
	return "[" + strings.Join(names, " ") + "]"
}

func opaque(params string, requests ...string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim, Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}
}

func decoded(cs ...resourceapi.DeviceAllocationConfiguration) string {
	m, err := configs(cs)
	if err != nil {
		return err.Error()
	}
	var out []string
	for r, c := range m {
		b, _ := json.Marshal(c)
		out = append(out, r+":"+string(b))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func optionsErr(args []string, env map[string]string) string {
	_, err := parseOptions(args, func(k string) string { return env[k] })
	if err != nil {
		return err.Error()
	}
	return "ok"
}

const vfConf = `{"apiVersion":"sriovnetwork.k8snetworkplumbingwg.io/v1alpha1","kind":"VfConfig"`

func TestConformance(t *testing.T) {
	node := map[string]string{"sriov_capable": "true"}
	conformance.Check(t, []row{
		{Src: mainGo, What: "positional arguments are refused", Got: func(*testing.T) string {
			return optionsErr([]string{"extra"}, map[string]string{"NODE_NAME": "n"})
		}, Want: "arguments not supported: [extra]"},
		{Src: mainGo, What: "the node name is required (NODE_NAME)", Got: func(*testing.T) string { return optionsErr(nil, nil) },
			Want: `Required flag "node-name" not set`},
		{Src: stateGo, What: "a configuration mode other than STANDALONE or MULTUS is refused", Got: func(*testing.T) string {
			return optionsErr(nil, map[string]string{"NODE_NAME": "n", "CONFIGURATION_MODE": "CHAINED"})
		}, Want: `unsupported configuration mode "CHAINED", expected "STANDALONE" or "MULTUS"`},
		{Src: mainGo, What: "MULTUS mode runs without NRI", Got: func(*testing.T) string {
			return optionsErr(nil, map[string]string{"NODE_NAME": "n", "CONFIGURATION_MODE": "MULTUS"})
		}, Want: "stand-in: configuration mode MULTUS is not implemented", Deviation: "the stand-in implements STANDALONE only, which the lane deploys (the chart's default)"},
		{Src: mainGo, What: "the chart's environment is taken (STANDALONE, metadata on, the registrar and plugin dirs)", Got: func(*testing.T) string {
			return optionsErr(nil, map[string]string{"NODE_NAME": "n", "CONFIGURATION_MODE": "STANDALONE", "ENABLE_DEVICE_METADATA": "true",
				"KUBELET_REGISTRAR_DIRECTORY_PATH": "/var/lib/kubelet/plugins_registry", "V": "3", "LOG_FORMAT": "text", "ALSOLOGTOSTDERR": "true"})
		}, Want: "ok"},
		{Src: discovery + " DiscoverSriovDevices; " + hostGo + " GetVFList", What: "each virtfnN of a PF with a netdev is a device named for its PCI address, ':' and '.' as '-'",
			Got: func(t *testing.T) string { return discovered(t, true) }, Want: "0000-3b-10-0(0000:3b:10.0) 0000-3b-10-2(0000:3b:10.2)"},
		{Src: discovery + " (TryGetInterfaceName empty: skipped)", What: "a PF whose netdev is not visible (moved into another netns) has no devices",
			Got: func(t *testing.T) string { return discovered(t, false) }, Want: ""},
		{Src: discovery, What: "no PCI functions at all is fatal", Got: func(t *testing.T) string {
			_, err := discover(t.TempDir())
			return err.Error()
		}, Want: "could not retrieve PCI devices"},
		{Src: discovery + "; " + hostGo + " GetLinkType, GetNumaNode; k8s.io/dynamic-resource-allocation deviceattribute/pci_linux.go@v0.36.1", What: "a VF's attributes",
			Got: func(t *testing.T) string {
				devs, _ := discover(sysTree(t, true))
				return attrString(devs["0000-3b-10-2"].device)
			},
			Want: "dra.net/numaNode=0 k8s.cni.cncf.io/deviceID=0000:3b:10.2 resource.kubernetes.io/pciBusID=0000:3b:10.2 resource.kubernetes.io/pcieRoot=pci0000:3a " +
				"sriovnetwork.k8snetworkplumbingwg.io/EswitchMode=legacy sriovnetwork.k8snetworkplumbingwg.io/PFName=pfname sriovnetwork.k8snetworkplumbingwg.io/deviceID=10ca " +
				"sriovnetwork.k8snetworkplumbingwg.io/linkType=ethernet sriovnetwork.k8snetworkplumbingwg.io/pciAddress=0000:3b:10.2 sriovnetwork.k8snetworkplumbingwg.io/pfDeviceID=10c9 " +
				"sriovnetwork.k8snetworkplumbingwg.io/pfPciAddress=0000:3b:00.0 sriovnetwork.k8snetworkplumbingwg.io/rdmaCapable=false sriovnetwork.k8snetworkplumbingwg.io/vendor=8086 sriovnetwork.k8snetworkplumbingwg.io/vfID=1",
			Deviation: "rdmaCapable is false without asking rdmamap: the rig has no RDMA devices; class, vendor and device are read from their files where ghw reads modalias, which the rig's sysfs lacks"},
		{Src: policyGo + " getPolicyDeviceMap", What: "no policy: nothing is published", Got: func(t *testing.T) string { return published(t, node) }, Want: "[]"},
		{Src: policyGo + "; kubevirt/kubevirtci cluster-up/cluster/kind-sriov/sriov-components/manifests/dra/sriov_dra_default_policy.yaml@39bd4947ba4d", What: "kubevirtci's default policy (one empty config) publishes every VF",
			Got: func(t *testing.T) string { return published(t, node, policy("default-policy", `{"configs":[{}]}`)) }, Want: "[0000-3b-10-0 0000-3b-10-2]"},
		{Src: policyGo + " deviceMatchesFilter", What: "a filter's fields are ANDed, its values ORed; linkType eth is ethernet",
			Got: func(t *testing.T) string {
				return published(t, node, policy("p", `{"configs":[{"resourceFilters":[{"pciAddresses":["0000:3b:10.2","0000:3b:99.0"],"pfNames":["pfname"],"linkType":"eth"}]}]}`))
			}, Want: "[0000-3b-10-2]"},
		{Src: policyGo + " matchesNodeSelector", What: "a policy whose node selector does not match the node publishes nothing",
			Got: func(t *testing.T) string {
				return published(t, node, policy("p", `{"nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"sriov_capable","operator":"In","values":["false"]}]}]},"configs":[{}]}`))
			}, Want: "[]"},
		{Src: policyGo, What: "a config with a deviceAttributesSelector merges DeviceAttributes", Got: func(t *testing.T) string {
			return published(t, node, policy("p", `{"configs":[{"deviceAttributesSelector":{"matchLabels":{"a":"b"}}}]}`))
		}, Want: "policy p: deviceAttributesSelector: DeviceAttributes are not implemented by the stand-in", Deviation: "not implemented; the lane makes no DeviceAttributes"},
		{Src: helpers, What: "a non-opaque config is refused", Got: func(*testing.T) string {
			return decoded(resourceapi.DeviceAllocationConfiguration{Source: resourceapi.AllocationConfigSourceClaim})
		}, Want: "only opaque parameters are supported by this driver"},
		{Src: helpers + "; " + apiGo + " (strict decoder)", What: "an unknown field in a VfConfig is refused", Got: func(*testing.T) string {
			return decoded(opaque(vfConf+`,"drivr":"vfio-pci"}`, "vf"))
		}, Want: `error decoding config parameters: json: unknown field "drivr"`},
		{Src: helpers + "; " + apiGo + " Override", What: "class then claim configs per request; only driver, ifName and netAttachDefName carry over",
			Got: func(*testing.T) string {
				class := opaque(vfConf+`,"driver":"vfio-pci","ifName":"a"}`, "vf")
				class.Source = resourceapi.AllocationConfigSourceClass
				return decoded(opaque(vfConf+`,"ifName":"b","addVhostMount":true,"netAttachDefName":"n","netAttachDefNamespace":"x"}`, "vf"), class)
			},
			Want: `vf:{"apiVersion":"sriovnetwork.k8snetworkplumbingwg.io/v1alpha1","kind":"VfConfig","driver":"vfio-pci","ifName":"b","netAttachDefName":"n"}`},
		{Src: hostGo + " GetVFIODeviceFile; " + stateGo + " applyConfigOnDevice", What: "driver vfio-pci: /dev/vfio/<group> and /dev/vfio/vfio as CDI device nodes",
			Got: func(t *testing.T) string {
				p := &plugin{o: options{sysRoot: sysTree(t, true), pluginsDir: t.TempDir()}}
				nodes, container, err := p.vfioNodes("0000:3b:10.2")
				if err != nil {
					return err.Error()
				}
				var out []string
				for _, n := range nodes {
					out = append(out, n.Path+"<-"+filepath.Base(n.HostPath))
				}
				return container + " " + strings.Join(out, " ")
			}, Want: "/dev/vfio/41 /dev/vfio/41<-41 /dev/vfio/vfio<-vfio",
			Deviation: "the host paths are character devices the stand-in makes (/dev/null's numbers) under its plugin data dir: the rig has no VFIO devices"},
		{Src: stateGo + " getNetAttachDefRawConfig; " + drv + "pkg/types/types.go" + at + " AddDeviceIDToNetConf", What: "STANDALONE: the NAD's config with the VF's PCI address as deviceID; no NAD, no prepare",
			Got: func(t *testing.T) string {
				nad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
					"metadata": map[string]any{"name": "sriov", "namespace": "ns"}, "spec": map[string]any{"config": `{"type":"sriov","cniVersion":"1.0.0"}`}}}
				dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{nadGVR: "NetworkAttachmentDefinitionList"})
				if err := dyn.Tracker().Create(nadGVR, nad, "ns"); err != nil {
					return err.Error()
				}
				p := &plugin{dyn: dyn}
				got, err := p.nadConfig(context.Background(), "ns", "sriov", "0000:3b:10.2")
				_, missing := p.nadConfig(context.Background(), "ns", "", "0000:3b:10.2")
				return fmt.Sprintf("%s %v | %v", got, err, missing != nil)
			}, Want: `{"cniVersion":"1.0.0","deviceID":"0000:3b:10.2","type":"sriov"} <nil> | true`},
		{Src: cdiGo + " CreateClaimSpecFile", What: "a claim's CDI spec is a transient spec of kind sriovnetwork.k8snetworkplumbingwg.io/vf named for the claim (the CDI cache's default format, YAML)",
			Got: func(t *testing.T) string {
				dir := t.TempDir()
				c, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
				if err != nil {
					return err.Error()
				}
				p := &plugin{cdi: c}
				if err := p.writeSpec(&cdispec.Spec{Kind: cdiKind, Devices: []cdispec.Device{{Name: "uid-0000-3b-10-2", ContainerEdits: cdispec.ContainerEdits{Env: []string{"A=b"}}}}}, "uid"); err != nil {
					return err.Error()
				}
				ents, _ := os.ReadDir(dir)
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				return strings.Join(names, " ")
			}, Want: "sriovnetwork.k8snetworkplumbingwg.io-vf_uid.yaml"},
	})
}
