package cni

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/test/apiserver"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// vfDevice is a device as dra-driver-sriov publishes a VF: named for its
// PCI address (DRADeviceName), with the address and its PF as attributes
// (pkg/devicestate/discovery.go@14490e9d438b).
func vfDevice(pci, pf string) resourcev1.Device {
	name := DRADeviceName(pci)
	attr := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: ptr.To(s)} }
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		DRAAttrPCIAddress: attr(pci),
		DRAAttrPFName:     attr(pf),
	}}
}

func slice(name, node string, generation, count int64, devices ...resourcev1.Device) resourcev1.ResourceSlice {
	return resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   DRADriverName,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: count},
			Devices:  devices,
		},
	}
}

func TestDRAPoolsTakeTheNewestCompleteGeneration(t *testing.T) {
	a, b, c := vfDevice("0000:3b:02.0", "ens1f0"), vfDevice("0000:3b:02.1", "ens1f0"), vfDevice("0000:3b:0a.0", "ens1f1")
	pools := DRAPools([]resourcev1.ResourceSlice{
		slice("old", "agent-0", 1, 1, a),
		slice("new-1", "agent-0", 2, 2, b, a),
		slice("new-2", "agent-0", 2, 2, c),
		slice("half", "agent-1", 1, 2, a),
		slice("empty", "agent-2", 1, 1),
	})
	p := pools["agent-0"]
	if p.Incomplete || fmt.Sprint(p.PerPF()) != "map[ens1f0:2 ens1f1:1]" || p.Devices[0].Name != "0000-3b-02-0" {
		t.Errorf("agent-0: %+v", p)
	}
	if !pools["agent-1"].Incomplete {
		t.Error("agent-1's pool has 1 of its 2 slices and was taken as complete")
	}
	if e, ok := pools["agent-2"]; !ok || len(e.Devices) != 0 || draPending(e, ok, map[string]int{"ens1f0": 1}) != "VFs per PF: want ens1f0 1, published none" {
		t.Errorf("agent-2, a pool with no device: %+v %v", e, ok)
	}
	if _, ok := pools["agent-3"]; ok || draPending(DRAPool{}, false, nil) != "no ResourceSlice published" {
		t.Error("a node without slices")
	}
	noAddr := vfDevice("0000:3b:02.0", "ens1f0")
	delete(noAddr.Attributes, DRAAttrPCIAddress)
	q := DRAPools([]resourcev1.ResourceSlice{slice("s", "n", 1, 1, noAddr)})["n"]
	if why := draPending(q, true, map[string]int{"ens1f0": 1}); !strings.Contains(why, "has no "+DRAAttrPCIAddress) {
		t.Errorf("a device without its PCI address: %q", why)
	}
}

func createSlice(t *testing.T, cs kubernetes.Interface, s resourcev1.ResourceSlice) {
	t.Helper()
	if _, err := cs.ResourceV1().ResourceSlices().Create(t.Context(), &s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Against a real API server: the wait ends once each agent's pool holds
// its VFs, whatever the order the slices come in; a pool short of a VF
// fails at the deadline naming the node, what it wants and what was
// published; a slice of another driver counts for nothing.
func TestWaitDRASlices(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	_, cs := startAPI(t)
	if err := CheckDRAServed(cs.Discovery()); err != nil {
		t.Fatalf("a Kubernetes 1.36 API server taken as lacking DRA: %v", err)
	}
	for _, n := range []string{"agent-0", "agent-1"} {
		createNode(t, cs, n)
	}
	want := map[string]map[string]int{"agent-0": {"ens1f0": 2}, "agent-1": {"ens1f1": 1}}
	other := slice("other-driver", "agent-1", 1, 1, vfDevice("0000:3b:0a.0", "ens1f1"))
	other.Spec.Driver = "gpu.example.com"
	other.Spec.Pool.Name = "agent-1-gpu"
	createSlice(t, cs, other)
	createSlice(t, cs, slice("agent-0-1", "agent-0", 1, 1, vfDevice("0000:3b:02.0", "ens1f0"), vfDevice("0000:3b:02.1", "ens1f0")))

	short, cancel := context.WithTimeout(t.Context(), bound.Scaled(2*time.Second))
	defer cancel()
	err := WaitDRASlices(short, cs, want)
	if err == nil {
		t.Fatal("the wait ended with agent-1's VF published by another driver only")
	}
	for _, s := range []string{"agent-1", "no ResourceSlice published"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("diagnosis lacks %q:\n%v", s, err)
		}
	}
	if strings.Contains(err.Error(), "node agent-0") {
		t.Errorf("diagnosis names agent-0, whose pool is complete:\n%v", err)
	}

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(30*time.Second))
		defer cancel()
		done <- WaitDRASlices(ctx, cs, want)
	}()
	createSlice(t, cs, slice("agent-1-1", "agent-1", 1, 1, vfDevice("0000:3b:0a.0", "ens1f1")))
	if err := <-done; err != nil {
		t.Fatalf("every pool published: %v", err)
	}

	short2, cancel2 := context.WithTimeout(t.Context(), bound.Scaled(2*time.Second))
	defer cancel2()
	err = WaitDRASlices(short2, cs, map[string]map[string]int{"agent-0": {"ens1f0": 3}})
	if err == nil || !strings.Contains(err.Error(), "VFs per PF: want ens1f0 3, published ens1f0 2") {
		t.Errorf("a pool short of a VF: %v", err)
	}
}

// TestCheckDRAServedRefusesAServerWithoutIt: an API server with
// resource.k8s.io/v1 switched off, as one older than 1.34 has it, is
// refused with the way out.
func TestCheckDRAServedRefusesAServerWithoutIt(t *testing.T) {
	t.Parallel() // a control plane of its own, on a slot of its own
	cs, err := kubernetes.NewForConfig(apiserver.StartForTest(t, "--runtime-config=resource.k8s.io/v1=false"))
	if err != nil {
		t.Fatal(err)
	}
	err = CheckDRAServed(cs.Discovery())
	if err == nil {
		t.Fatal("a server without resource.k8s.io/v1 was taken as serving DRA")
	}
	for _, w := range []string{"resource.k8s.io/v1", "k3sImage", "vfAllocation devicePlugin"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
}

func TestDRAPoolString(t *testing.T) {
	pools := DRAPools([]resourcev1.ResourceSlice{
		slice("a", "agent-0", 1, 1, vfDevice("0000:3b:02.0", "ens1f0"), vfDevice("0000:3b:02.1", "ens1f0"), vfDevice("0000:3b:0a.0", "ens1f1")),
		slice("b", "agent-1", 1, 2, vfDevice("0000:3b:02.0", "ens1f0")),
	})
	if got := pools["agent-0"].String(); got != "3 VFs (ens1f0 2, ens1f1 1)" {
		t.Errorf("agent-0: %q", got)
	}
	if got := pools["agent-1"].String(); got != "1 VFs (ens1f0 1), being replaced" {
		t.Errorf("agent-1: %q", got)
	}
}
