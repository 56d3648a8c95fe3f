package smoke

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// Verify looks inside the smoke pod, once Ready (WaitPodsReady), for
// the VF it was given: the device plugin's PCIDEVICE_* variable naming one
// PCI address, then in vfio-pci mode its /dev/vfio group, in netdevice mode
// Multus's network-status entry for the smoke network (same PCI address)
// and that interface with its address in the pod's network namespace.
// report gets each passed check and what it found; the first failure ends
// the checks with an error naming the pod, the check, what was expected and
// found, and the pod's last events.
func Verify(ctx context.Context, kc *kube.Clients, o cni.Options, report func(check, found string)) (PCIDevice, error) {
	cs := kc.Typed
	o, err := o.WithDefaults()
	if err != nil {
		return PCIDevice{}, fmt.Errorf("network component options: %w", err)
	}
	ns := o.SmokeNamespace
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, PodName, metav1.GetOptions{})
	if err != nil {
		return PCIDevice{}, fmt.Errorf("getting smoke pod %s/%s: %w", ns, PodName, err)
	}
	fail := func(err error) (PCIDevice, error) { return PCIDevice{}, smokeFailure(ctx, cs, pod, err) }
	if !cni.PodReady(pod) {
		return fail(&CheckError{Check: CheckPodReady, Expected: "a Ready pod", Found: "phase " + string(pod.Status.Phase) + ", not Ready"})
	}
	report(CheckPodReady, fmt.Sprintf("%s/%s on node %s", ns, pod.Name, pod.Spec.NodeName))
	run := func(cmd ...string) CmdOutput {
		return execInPod(ctx, kc.Config, cs, ns, pod.Name, Container, cmd...)
	}

	if o.VFAllocation == config.VFAllocationDRA {
		return verifyDRA(ctx, kc, o, pod, run, fail, report)
	}
	dev, found, err := checkPCIDeviceEnv(run("env"), PCIDeviceEnvName(o.ResourcePrefix, o.ResourceName))
	if err != nil {
		return fail(err)
	}
	report(CheckPCIDeviceEnv, found)
	switch o.VFDriver {
	case config.VFDriverVFIO:
		found, err := checkVFIODevices(run("ls", "-l", "/dev/vfio/"), dev)
		if err != nil {
			return fail(err)
		}
		report(CheckVFIODevice, found)
	case config.VFDriverNetdevice:
		st, found, err := checkNetworkStatus(pod.Annotations[nadv1.NetworkStatusAnnot], ns+"/"+NetworkName, dev, netip.MustParsePrefix(Subnet))
		if err != nil {
			return fail(err)
		}
		report(CheckNetworkStatus, found)
		found, err = checkPodInterface(st,
			run("cat", "/sys/class/net/"+st.Interface+"/address"),
			run("ip", "-o", "addr", "show", "dev", st.Interface))
		if err != nil {
			return fail(err)
		}
		report(CheckPodInterface, found)
	}
	return dev, nil
}

// verifyDRA checks a dra lane's smoke pod: the driver's variable naming
// one PCI address, the pod's claim allocated that device, then in
// vfio-pci mode its /dev/vfio group, in netdevice mode the interface the
// driver's sriov-cni moved into the pod with an address of the smoke NAD.
func verifyDRA(ctx context.Context, kc *kube.Clients, o cni.Options, pod *corev1.Pod, run func(...string) CmdOutput,
	fail func(error) (PCIDevice, error), report func(check, found string)) (PCIDevice, error) {
	dev, found, err := checkDRADeviceEnv(run("env"))
	if err != nil {
		return fail(err)
	}
	report(CheckDRAEnv, found)
	claim, err := podClaim(ctx, kc.Typed, pod)
	if err != nil {
		return fail(&CheckError{Check: CheckClaim, Expected: "the pod's claim " + ClaimName, Found: err.Error()})
	}
	if found, err = checkClaimDevice(claim, cni.DRADriverName, dev); err != nil {
		return fail(err)
	}
	report(CheckClaim, found)
	switch o.VFDriver {
	case config.VFDriverVFIO:
		found, err = checkVFIODevices(run("ls", "-l", "/dev/vfio/"), dev)
		if err != nil {
			return fail(err)
		}
		report(CheckVFIODevice, found)
	case config.VFDriverNetdevice:
		found, err = checkDRAInterface(netip.MustParsePrefix(Subnet),
			run("cat", "/sys/class/net/"+DRAInterface+"/address"),
			run("ip", "-o", "addr", "show", "dev", DRAInterface))
		if err != nil {
			return fail(err)
		}
		report(CheckPodInterface, found)
	}
	return dev, nil
}

// podClaim is the claim the pod's status names for ClaimName (made from
// the template by kube-controller-manager).
func podClaim(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) (*resourcev1.ResourceClaim, error) {
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == ClaimName && st.ResourceClaimName != nil {
			return cs.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, *st.ResourceClaimName, metav1.GetOptions{})
		}
	}
	return nil, fmt.Errorf("pod status names no claim for %s", ClaimName)
}

// claimPoll is how often WaitClaimsGone looks: kube-controller-manager
// deletes a pod's generated claim within a second or so of the pod going.
const claimPoll = 250 * time.Millisecond

// WaitClaimsGone waits until no ResourceClaim in namespace is owned by
// the smoke pod: the claim made for it is deleted, the driver has
// unprepared it, and its device can be allocated again.
func WaitClaimsGone(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	var left []string
	err := wait.PollUntilContextCancel(ctx, claimPoll, true, func(ctx context.Context) (bool, error) {
		list, err := cs.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, c := range list.Items {
			for _, or := range c.OwnerReferences {
				if or.Kind == "Pod" && or.Name == PodName {
					left = append(left, c.Name)
				}
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the smoke pod's claims in %s to be gone (%s still there; its VF is not free until then): %w", namespace, strings.Join(left, ", "), err)
	}
	return nil
}

// DeleteClaimTemplate deletes the dra smoke pod's ResourceClaimTemplate,
// if there is one, once the pod is gone; the claim made from it goes with
// the pod (kube-controller-manager deletes a claim generated for a pod
// that is gone), which is when the driver's device is free again.
func DeleteClaimTemplate(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	err := cs.ResourceV1().ResourceClaimTemplates(namespace).Delete(ctx, ClaimTemplateName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ResourceClaimTemplate %s/%s: %w", namespace, ClaimTemplateName, err)
	}
	return nil
}

// smokeFailure names the pod and its node, says what failed and appends
// the pod's last events.
func smokeFailure(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, err error) error {
	dctx, cancel := cni.DiagnoseContext(ctx)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "smoke pod %s/%s on node %s: %v\n", pod.Namespace, pod.Name, pod.Spec.NodeName, err)
	cni.WriteEvents(dctx, &b, cs, "Pod", pod.Namespace, pod.Name, "  ")
	return &smokeError{msg: strings.TrimRight(b.String(), "\n"), err: err}
}

type smokeError struct {
	msg string
	err error
}

func (e *smokeError) Error() string { return e.msg }
func (e *smokeError) Unwrap() error { return e.err }

// DeletePod deletes the smoke pod in namespace and waits until it is
// gone: kubelet stopped it and the CNI DEL ran, so its VF is free for the
// next pod. It reports whether there was a pod.
func DeletePod(ctx context.Context, cs kubernetes.Interface, namespace string) (bool, error) {
	pods := cs.CoreV1().Pods(namespace)
	p, err := pods.Get(ctx, PodName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting smoke pod %s/%s: %w", namespace, PodName, err)
	}
	uid := p.UID
	err = pods.Delete(ctx, PodName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return true, fmt.Errorf("deleting smoke pod %s/%s: %w", namespace, PodName, err)
	}
	if err := cni.WaitPodGone(ctx, cs, namespace, PodName, uid); err != nil {
		dctx, cancel := cni.DiagnoseContext(ctx)
		defer cancel()
		var b strings.Builder
		fmt.Fprintf(&b, "waiting for smoke pod %s/%s to be gone (its VF is not free until then): %v\n", namespace, PodName, err)
		if p, gerr := pods.Get(dctx, PodName, metav1.GetOptions{}); gerr == nil {
			cni.WritePod(dctx, &b, cs, p, "")
		}
		return true, errors.New(strings.TrimRight(b.String(), "\n"))
	}
	return true, nil
}

// DeleteNetwork deletes the smoke NetworkAttachmentDefinition, if
// there is one. Call it after the pod is gone: Multus's CNI DEL reads the
// pod's delegates from its cache, but without that cache it loads them
// from the NAD again (k8snetworkplumbingwg/multus-cni
// pkg/multus/multus.go@v4.3.0 CmdDel).
func DeleteNetwork(ctx context.Context, dyn dynamic.Interface, namespace string) error {
	err := dyn.Resource(cni.NADResource).Namespace(namespace).Delete(ctx, NetworkName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NetworkAttachmentDefinition %s/%s: %w", namespace, NetworkName, err)
	}
	return nil
}
