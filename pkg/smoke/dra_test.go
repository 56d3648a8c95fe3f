package smoke

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// A dra lane's smoke pod takes a claim from a template of the driver's
// class, with a VfConfig naming the smoke NAD (driver vfio-pci only in
// vfio-pci mode), and asks for no extended resource and no Multus network.
func TestDRAObjects(t *testing.T) {
	for _, driver := range []string{config.VFDriverVFIO, config.VFDriverNetdevice} {
		o := testOptions()
		o.VFAllocation, o.VFDriver = config.VFAllocationDRA, driver
		objs, err := Objects(o)
		if err != nil {
			t.Fatal(err)
		}
		var pod corev1.Pod
		var tmpl resourcev1.ResourceClaimTemplate
		kinds := map[string]bool{}
		for _, u := range objs {
			kinds[u.GetKind()] = true
			if len(u.GetAnnotations()) > 0 {
				t.Errorf("%s: %s has annotations %v", driver, u.GetKind(), u.GetAnnotations())
			}
			var into any
			switch u.GetKind() {
			case "Pod":
				into = &pod
			case "ResourceClaimTemplate":
				into = &tmpl
			default:
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
				t.Fatal(err)
			}
		}
		if !kinds["NetworkAttachmentDefinition"] || !kinds["ResourceClaimTemplate"] || !kinds["Pod"] {
			t.Fatalf("%s: kinds %v", driver, kinds)
		}
		c := pod.Spec.Containers[0]
		if len(c.Resources.Limits) > 0 || len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != ClaimName {
			t.Errorf("%s: container resources %+v", driver, c.Resources)
		}
		if rc := pod.Spec.ResourceClaims; len(rc) != 1 || rc[0].ResourceClaimTemplateName == nil || *rc[0].ResourceClaimTemplateName != ClaimTemplateName {
			t.Errorf("%s: pod claims %+v", driver, rc)
		}
		d := tmpl.Spec.Spec.Devices
		if len(d.Requests) != 1 || d.Requests[0].Exactly == nil || d.Requests[0].Exactly.DeviceClassName != cni.DRADeviceClass {
			t.Errorf("%s: requests %+v", driver, d.Requests)
		}
		var vfc map[string]string
		if len(d.Config) != 1 || d.Config[0].Opaque == nil || d.Config[0].Opaque.Driver != cni.DRADriverName ||
			json.Unmarshal(d.Config[0].Opaque.Parameters.Raw, &vfc) != nil {
			t.Fatalf("%s: config %+v", driver, d.Config)
		}
		want := map[string]string{"apiVersion": cni.DRADriverName + "/v1alpha1", "kind": "VfConfig", "netAttachDefName": NetworkName}
		if driver == config.VFDriverVFIO {
			want["driver"] = "vfio-pci"
		}
		if len(vfc) != len(want) {
			t.Errorf("%s: VfConfig %v, want %v", driver, vfc, want)
		}
		for k, v := range want {
			if vfc[k] != v {
				t.Errorf("%s: VfConfig %v, want %v", driver, vfc, want)
			}
		}
	}
}

func TestCheckDRADeviceEnv(t *testing.T) {
	for _, c := range []struct {
		env, addr, vfio, errPart string
	}{
		{env: "SRIOVNETWORK_PCI_ADDRESSES=0000:41:10.0\nSRIOVNETWORK_0000_41_10_0_VFIO_DEVICE=/dev/vfio/41\n", addr: "0000:41:10.0", vfio: "/dev/vfio/41"},
		{env: "SRIOVNETWORK_PCI_ADDRESSES=0000:41:10.0\n", addr: "0000:41:10.0"},
		{env: "PATH=/bin\n", errPart: "no SRIOVNETWORK_PCI_ADDRESSES"},
		{env: "SRIOVNETWORK_PCI_ADDRESSES=0000:41:10.0,0000:41:10.1\n", errPart: "not one PCI address"},
		{env: "SRIOVNETWORK_PCI_ADDRESSES=vf0\n", errPart: "not one PCI address"},
	} {
		dev, _, err := checkDRADeviceEnv(CmdOutput{Stdout: c.env})
		switch {
		case c.errPart != "":
			var ce *CheckError
			if !errors.As(err, &ce) || !strings.Contains(ce.Found, c.errPart) {
				t.Errorf("%q: error %v, want one saying %q", c.env, err, c.errPart)
			}
		case err != nil || dev.Address != c.addr || dev.VFIODev != c.vfio:
			t.Errorf("%q: %+v %v", c.env, dev, err)
		}
	}
}

func TestCheckClaimDevice(t *testing.T) {
	claim := func(results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		if results != nil {
			c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: results}}
		}
		return c
	}
	dev := PCIDevice{Address: "0000:41:10.0"}
	res := func(driver, device string) resourcev1.DeviceRequestAllocationResult {
		return resourcev1.DeviceRequestAllocationResult{Driver: driver, Pool: "node", Device: device, Request: "vf"}
	}
	if _, err := checkClaimDevice(claim(res(cni.DRADriverName, "0000-41-10-0")), cni.DRADriverName, dev); err != nil {
		t.Errorf("the allocated device: %v", err)
	}
	for name, c := range map[string]*resourcev1.ResourceClaim{
		"not allocated":  claim(),
		"another device": claim(res(cni.DRADriverName, "0000-41-10-1")),
		"another driver": claim(res("gpu.example.com", "0000-41-10-0")),
		"two devices":    claim(res(cni.DRADriverName, "0000-41-10-0"), res(cni.DRADriverName, "0000-41-10-1")),
	} {
		if _, err := checkClaimDevice(c, cni.DRADriverName, dev); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestCheckDRAInterface(t *testing.T) {
	subnet := netip.MustParsePrefix(Subnet)
	mac := CmdOutput{Stdout: "02:00:00:00:00:01\n"}
	in := CmdOutput{Stdout: "5: vfnet0    inet 10.56.217.3/24 brd 10.56.217.255 scope global vfnet0\\       valid_lft forever preferred_lft forever\n"}
	if found, err := checkDRAInterface(subnet, mac, in); err != nil || !strings.Contains(found, "10.56.217.3/24") {
		t.Errorf("an address in the subnet: %q %v", found, err)
	}
	out := CmdOutput{Stdout: "5: vfnet0    inet 192.168.1.3/24 scope global vfnet0\n"}
	if _, err := checkDRAInterface(subnet, mac, out); err == nil {
		t.Error("an address outside the subnet passed")
	}
	if _, err := checkDRAInterface(subnet, mac, CmdOutput{Err: errors.New("exit 1")}); err == nil {
		t.Error("a failed ip passed")
	}
}
