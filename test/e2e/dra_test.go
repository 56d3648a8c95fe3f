package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	pkglane "github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/smoke"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// A lane in DRA mode on the rig, in each VF driver mode on a lane of its
// own, in parallel: dra-driver-sriov (the stand-in, on real kubelet and
// containerd: its plugin registered with kubelet, its NRI plugin with
// containerd) publishes one slice per agent listing exactly the agent's
// VFs with their PCI addresses and PF, verify gets a VF into a pod through
// a ResourceClaimTemplate, reset removes the claims a job made and repair
// brings a restarted agent's slice back (netdevice lane), and down returns
// every PF. On the vfio-pci
// lane, whose one PF has two VFs, two pods each claiming a VF get
// different VFs and a third stays pending until one of them is gone.
func TestDRAOnTheRig(t *testing.T) {
	parallelOnRig(t)
	for _, driver := range []string{config.VFDriverVFIO, config.VFDriverNetdevice} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			_, r, l := rigLane(t, 1, func(c *config.Lane) {
				c.VFAllocation = config.VFAllocationDRA
				c.VFDriver = driver
				c.Agents, c.PFsPerNode, c.VFsPerPF = 1, 1, 2
				c.WaitTimeout.Duration = testutil.CommandBound / 2
			})
			l.up(t)
			cs := kubernetes.NewForConfigOrDie(restConfig(t, l.cfg.KubeconfigPath()))
			if !t.Run("slices", func(t *testing.T) { checkDRASlices(t, cs, l, r.State.PFs[0].Name, r.State.PFs[0].BDF) }) {
				return
			}
			res := run(t, nil, "verify", "--config", l.path)
			if res.code != 0 {
				t.Fatalf("verify in %s mode: exit %d", driver, res.code)
			}
			for _, want := range []string{"ok  resource claim:", "of DeviceClass " + cni.DRADeviceClass} {
				if !strings.Contains(res.output, want) {
					t.Errorf("verify's output lacks %q:\n%s", want, res.output)
				}
			}
			if driver == config.VFDriverVFIO {
				t.Run("claims", func(t *testing.T) { checkDRAClaims(t, cs, l) })
			} else {
				if t.Run("reset", func(t *testing.T) { checkDRAReset(t, cs, l, r.State.PFs[0].Name, r.State.PFs[0].BDF) }) {
					t.Run("repair", func(t *testing.T) { checkDRARepair(t, cs, l, r.State.PFs[0].Name, r.State.PFs[0].BDF) })
				}
			}
			if res := l.down(t); res.code != 0 {
				t.Fatal("down failed")
			}
			assertLaneGone(t, r, l, r.State.PFs)
		})
	}
}

// checkDRASlices: the driver's slices name the agent, in a pool of the
// agent's name, with one device per VF of the PF, each carrying its PCI
// address and PF name (k8snetworkplumbingwg/dra-driver-sriov
// pkg/devicestate/discovery.go@14490e9d438b), and status shows them.
func checkDRASlices(t *testing.T, cs kubernetes.Interface, l *lane, pf, pfBDF string) {
	slices, err := cs.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{FieldSelector: "spec.driver=" + cni.DRADriverName})
	if err != nil {
		t.Fatal(err)
	}
	agent := "k3d-" + l.cfg.Name + "-agent-0"
	if len(slices.Items) != 1 {
		t.Fatalf("%d slices of %s, want 1 (the agent's)", len(slices.Items), cni.DRADriverName)
	}
	s := slices.Items[0]
	if s.Spec.NodeName == nil || *s.Spec.NodeName != agent || s.Spec.Pool.Name != agent {
		t.Errorf("slice %s: node %v, pool %s, want %s for both", s.Name, ptr.Deref(s.Spec.NodeName, ""), s.Spec.Pool.Name, agent)
	}
	if len(s.Spec.Devices) != l.cfg.VFsPerPF {
		t.Errorf("slice %s lists %d devices, want %d", s.Name, len(s.Spec.Devices), l.cfg.VFsPerPF)
	}
	for _, d := range s.Spec.Devices {
		pci := d.Attributes[cni.DRADriverName+"/pciAddress"].StringValue
		name := d.Attributes[cni.DRADriverName+"/PFName"].StringValue
		pfPCI := d.Attributes[cni.DRADriverName+"/pfPciAddress"].StringValue
		if pci == nil || cni.DRADeviceName(*pci) != d.Name || ptr.Deref(name, "") != pf || ptr.Deref(pfPCI, "") != pfBDF {
			t.Errorf("device %s: pciAddress %v, PFName %v, pfPciAddress %v; want its own address, %s, %s", d.Name, ptr.Deref(pci, ""), ptr.Deref(name, ""), ptr.Deref(pfPCI, ""), pf, pfBDF)
		}
	}
	if st := run(t, nil, "status", "--config", l.path); !strings.Contains(st.output, fmt.Sprintf("%d VFs (%s %d)", l.cfg.VFsPerPF, pf, l.cfg.VFsPerPF)) {
		t.Errorf("status does not show the slice's VFs:\n%s", st.output)
	}
}

// checkDRAClaims: two pods each take a VF (driver vfio-pci, so
// /dev/vfio/<group> is theirs) and get different ones; a third stays
// pending while both are held, and gets a VF once one pod is gone.
func checkDRAClaims(t *testing.T, cs kubernetes.Interface, l *lane) {
	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(4*time.Minute))
	defer cancel()
	const ns = "dra-claims"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The namespace goes with the lane; deleting it here lets the pods'
	// claims go before down.
	defer func() { _ = cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{}) }()
	// As verify makes its smoke objects, in a namespace of this test's.
	o := pkglane.CNIOptions(l.cfg, []string{"unused"})
	o.SmokeNamespace = ns
	objs, err := smoke.Objects(o)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kube.Connect(l.cfg.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	var podTemplate corev1.Pod
	var others []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() != "Pod" {
			others = append(others, u)
		} else if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &podTemplate); err != nil {
			t.Fatal(err)
		}
	}
	if err := cni.Apply(ctx, kc, others, log.Noop); err != nil {
		t.Fatal(err)
	}
	mkPod := func(name string) {
		p := podTemplate.DeepCopy()
		p.ResourceVersion = ""
		p.Name = name
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitDefaultServiceAccount(t, cs, ns)
	mkPod("a")
	mkPod("b")
	if err := cni.WaitPodsReady(ctx, cs, ns, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	devs := map[string]string{}
	for _, name := range []string{"a", "b"} {
		devs[name] = claimedDevice(t, ctx, cs, ns, name)
	}
	if devs["a"] == "" || devs["a"] == devs["b"] {
		t.Errorf("pods a and b hold devices %q and %q, want two different VFs", devs["a"], devs["b"])
	}
	mkPod("c")
	// Pending with no VF left: the scheduler tried and found no device for
	// its claim, and says so on the pod (PodScheduled false, Unschedulable).
	var c *corev1.Pod
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		c, err = cs.CoreV1().Pods(ns).Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable || cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod c never got the scheduler's verdict: %v", err)
	}
	if c.Status.Phase != corev1.PodPending || c.Spec.NodeName != "" {
		t.Errorf("pod c with both VFs held: phase %s on node %q, want Pending and unscheduled", c.Status.Phase, c.Spec.NodeName)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := cni.WaitPodsReady(ctx, cs, ns, []string{"c"}); err != nil {
		t.Fatalf("pod c after pod a is gone: %v", err)
	}
	if got := claimedDevice(t, ctx, cs, ns, "c"); got != devs["a"] {
		t.Errorf("pod c holds %q, want the VF pod a let go, %q", got, devs["a"])
	}
}

// claimedDevice is the device the pod's claim was allocated.
func claimedDevice(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, pod string) string {
	t.Helper()
	var dev string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, nil
		}
		c, err := cs.ResourceV1().ResourceClaims(ns).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil || c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
			return false, nil
		}
		dev = c.Status.Allocation.Devices.Results[0].Device
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod %s's claim: %v", pod, err)
	}
	return dev
}

// checkDRAReset: a claim and a claim template a job made in a namespace
// that stays (default) are gone after reset; the driver's slice is not.
func checkDRAReset(t *testing.T, cs kubernetes.Interface, l *lane, pf, pfBDF string) {
	ctx := t.Context()
	spec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name: "vf", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: cni.DRADeviceClass},
	}}}}
	if _, err := cs.ResourceV1().ResourceClaimTemplates("default").Create(ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "job-vf"}, Spec: resourcev1.ResourceClaimTemplateSpec{Spec: spec},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ResourceV1().ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "job-vf"}, Spec: spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := run(t, nil, "reset", "--config", l.path); res.code != 0 {
		t.Fatalf("reset: exit %d", res.code)
	}
	if _, err := cs.ResourceV1().ResourceClaimTemplates("default").Get(ctx, "job-vf", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the job's claim template after reset: %v, want not found", err)
	}
	if _, err := cs.ResourceV1().ResourceClaims("default").Get(ctx, "job-vf", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the job's claim after reset: %v, want not found", err)
	}
	checkDRASlices(t, cs, l, pf, pfBDF)
}

// checkDRARepair: the agent's container restarted (its PF stays in the
// old, pinned netns), the driver's pod starts again and finds no PF;
// repair moves the PF back, restarts the driver and waits until its slice
// lists the VFs again.
func checkDRARepair(t *testing.T, cs kubernetes.Interface, l *lane, pf, pfBDF string) {
	agent := "k3d-" + l.cfg.Name + "-agent-0"
	restarted := time.Now()
	if err := docker(t).ContainerRestart(t.Context(), agent, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPluginStarted(t, cs, cni.DRANamespace, "app.kubernetes.io/component=kubeletplugin", agent, restarted)
	res := run(t, nil, "repair", "--config", l.path)
	if res.code != 0 || !strings.Contains(res.output, "repaired ("+agent+")") || !strings.Contains(res.output, "✓ restart the DRA driver (") || !strings.Contains(res.output, "✓ wait for VFs (") {
		t.Fatalf("repair of the restarted agent: exit %d\n%s", res.code, res.output)
	}
	checkDRASlices(t, cs, l, pf, pfBDF)
}
