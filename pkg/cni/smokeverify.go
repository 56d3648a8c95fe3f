package cni

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
)

// VerifySmoke looks inside the smoke pod, once Ready (WaitPodsReady), for
// the VF it was given: the device plugin's PCIDEVICE_* variable naming one
// PCI address, then in vfio-pci mode its /dev/vfio group, in netdevice mode
// Multus's network-status entry for the smoke network (same PCI address)
// and that interface with its address in the pod's network namespace.
// report gets each passed check and what it found; the first failure ends
// the checks with an error naming the pod, the check, what was expected and
// found, and the pod's last events.
func VerifySmoke(ctx context.Context, kc *kube.Clients, o Options, report func(check, found string)) (PCIDevice, error) {
	cs := kc.Typed
	o, err := o.withDefaults()
	if err != nil {
		return PCIDevice{}, fmt.Errorf("network component options: %w", err)
	}
	ns := o.SmokeNamespace
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, SmokePodName, metav1.GetOptions{})
	if err != nil {
		return PCIDevice{}, fmt.Errorf("getting smoke pod %s/%s: %w", ns, SmokePodName, err)
	}
	fail := func(err error) (PCIDevice, error) { return PCIDevice{}, smokeFailure(ctx, cs, pod, err) }
	if !podReady(pod) {
		return fail(&CheckError{Check: CheckPodReady, Expected: "a Ready pod", Found: "phase " + string(pod.Status.Phase) + ", not Ready"})
	}
	report(CheckPodReady, fmt.Sprintf("%s/%s on node %s", ns, pod.Name, pod.Spec.NodeName))
	run := func(cmd ...string) CmdOutput {
		return execInPod(ctx, kc.Config, cs, ns, pod.Name, SmokeContainer, cmd...)
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
		st, found, err := checkNetworkStatus(pod.Annotations[nadv1.NetworkStatusAnnot], ns+"/"+SmokeNetworkName, dev, netip.MustParsePrefix(SmokeSubnet))
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

// smokeFailure names the pod and its node, says what failed and appends
// the pod's last events.
func smokeFailure(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, err error) error {
	dctx, cancel := diagnoseContext(ctx)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "smoke pod %s/%s on node %s: %v\n", pod.Namespace, pod.Name, pod.Spec.NodeName, err)
	writeEvents(dctx, &b, cs, "Pod", pod.Namespace, pod.Name, "  ")
	return &smokeError{msg: strings.TrimRight(b.String(), "\n"), err: err}
}

type smokeError struct {
	msg string
	err error
}

func (e *smokeError) Error() string { return e.msg }
func (e *smokeError) Unwrap() error { return e.err }

// DeleteSmokePod deletes the smoke pod in namespace and waits until it is
// gone: kubelet stopped it and the CNI DEL ran, so its VF is free for the
// next pod. It reports whether there was a pod.
func DeleteSmokePod(ctx context.Context, cs kubernetes.Interface, namespace string) (bool, error) {
	pods := cs.CoreV1().Pods(namespace)
	p, err := pods.Get(ctx, SmokePodName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting smoke pod %s/%s: %w", namespace, SmokePodName, err)
	}
	uid := p.UID
	err = pods.Delete(ctx, SmokePodName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return true, fmt.Errorf("deleting smoke pod %s/%s: %w", namespace, SmokePodName, err)
	}
	if err := waitPodGone(ctx, cs, namespace, SmokePodName, uid); err != nil {
		dctx, cancel := diagnoseContext(ctx)
		defer cancel()
		var b strings.Builder
		fmt.Fprintf(&b, "waiting for smoke pod %s/%s to be gone (its VF is not free until then): %v\n", namespace, SmokePodName, err)
		if p, gerr := pods.Get(dctx, SmokePodName, metav1.GetOptions{}); gerr == nil {
			writePod(dctx, &b, cs, p, "")
		}
		return true, errors.New(strings.TrimRight(b.String(), "\n"))
	}
	return true, nil
}

// waitPodGone waits until no pod namespace/name with uid exists.
func waitPodGone(ctx context.Context, cs kubernetes.Interface, namespace, name string, uid types.UID) error {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := listWatch(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = sel
		return cs.CoreV1().Pods(namespace).List(ctx, o)
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sel
		return cs.CoreV1().Pods(namespace).Watch(ctx, o)
	})
	// A fake clientset (tests) says it cannot stream a watch-list.
	return watchUntil(ctx, cache.ToListWatcherWithWatchListSemantics(lw, cs), &corev1.Pod{}, func(objs []any) (bool, error) {
		for _, o := range objs {
			if o.(*corev1.Pod).UID == uid {
				return false, nil
			}
		}
		return true, nil
	})
}

// DeleteSmokeNetwork deletes the smoke NetworkAttachmentDefinition, if
// there is one. Call it after the pod is gone: Multus's CNI DEL reads the
// pod's delegates from its cache, but without that cache it loads them
// from the NAD again (k8snetworkplumbingwg/multus-cni
// pkg/multus/multus.go@v4.3.0 CmdDel).
func DeleteSmokeNetwork(ctx context.Context, dyn dynamic.Interface, namespace string) error {
	err := dyn.Resource(nadGVR).Namespace(namespace).Delete(ctx, SmokeNetworkName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NetworkAttachmentDefinition %s/%s: %w", namespace, SmokeNetworkName, err)
	}
	return nil
}
