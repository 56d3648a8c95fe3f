package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

var policyGVR = schema.GroupVersionResource{Group: driverName, Version: "v1alpha1", Resource: "sriovresourcepolicies"}

// policySpec is SriovResourcePolicySpec
// (pkg/api/sriovdra/v1alpha1/api.go@14490e9d438b).
type policySpec struct {
	NodeSelector *corev1.NodeSelector `json:"nodeSelector,omitempty"`
	Configs      []struct {
		DeviceAttributesSelector *metav1.LabelSelector `json:"deviceAttributesSelector,omitempty"`
		ResourceFilters          []resourceFilter      `json:"resourceFilters,omitempty"`
	} `json:"configs,omitempty"`
}

type resourceFilter struct {
	Vendors        []string `json:"vendors,omitempty"`
	Devices        []string `json:"devices,omitempty"`
	PciAddresses   []string `json:"pciAddresses,omitempty"`
	PfNames        []string `json:"pfNames,omitempty"`
	PfPciAddresses []string `json:"pfPciAddresses,omitempty"`
	Drivers        []string `json:"drivers,omitempty"`
	LinkType       string   `json:"linkType,omitempty"`
}

type namedPolicy struct {
	name string
	spec policySpec
}

// advertised is pkg/controller/resourcepolicycontroller.go@14490e9d438b
// getPolicyDeviceMap: the policies whose node selector matches the node
// (nil or no terms: every node; terms ORed, each term's expressions as a
// label selector), taken in name order, each config's filters matching a
// device if any filter matches it (no filters: every device; in a filter,
// every non-empty field must hold the device's attribute, drivers being
// ignored, "not yet implemented"). No matching policy, nothing published.
//
// The stand-in refuses a config with a deviceAttributesSelector: it does
// not implement DeviceAttributes, and the lane never makes one.
func advertised(devs map[string]vfDevice, policies []namedPolicy, nodeLabels map[string]string) ([]resourceapi.Device, error) {
	sort.Slice(policies, func(i, j int) bool { return policies[i].name < policies[j].name })
	picked := map[string]bool{}
	for _, p := range policies {
		if !nodeMatches(nodeLabels, p.spec.NodeSelector) {
			continue
		}
		for _, c := range p.spec.Configs {
			if c.DeviceAttributesSelector != nil {
				return nil, fmt.Errorf("policy %s: deviceAttributesSelector: DeviceAttributes are not implemented by the stand-in", p.name)
			}
			for name, d := range devs {
				if len(c.ResourceFilters) == 0 || slices.ContainsFunc(c.ResourceFilters, func(f resourceFilter) bool { return filterMatches(d.device, f) }) {
					picked[name] = true
				}
			}
		}
	}
	out := make([]resourceapi.Device, 0, len(picked))
	for name := range picked {
		out = append(out, devs[name].device)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func nodeMatches(nodeLabels map[string]string, ns *corev1.NodeSelector) bool {
	if ns == nil || len(ns.NodeSelectorTerms) == 0 {
		return true
	}
	for _, term := range ns.NodeSelectorTerms {
		var exprs []metav1.LabelSelectorRequirement
		for _, r := range term.MatchExpressions {
			exprs = append(exprs, metav1.LabelSelectorRequirement{Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values})
		}
		sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: exprs})
		if err != nil {
			continue
		}
		if sel.Matches(labels.Set(nodeLabels)) {
			return true
		}
	}
	return false
}

func filterMatches(d resourceapi.Device, f resourceFilter) bool {
	has := func(want []string, attr resourceapi.QualifiedName) bool {
		if len(want) == 0 {
			return true
		}
		a, ok := d.Attributes[attr]
		return ok && a.StringValue != nil && slices.Contains(want, *a.StringValue)
	}
	if !has(f.Vendors, attrVendor) || !has(f.Devices, attrDeviceID) || !has(f.PciAddresses, attrPCIAddress) ||
		!has(f.PfNames, attrPFName) || !has(f.PfPciAddresses, attrPfPCIAddress) {
		return false
	}
	if f.LinkType != "" {
		a, ok := d.Attributes[attrLinkType]
		if !ok || a.StringValue == nil || normalizeLinkType(f.LinkType) != *a.StringValue {
			return false
		}
	}
	return true
}

// normalizeLinkType is v1alpha1 NormalizeLinkType
// (pkg/api/sriovdra/v1alpha1/api.go@14490e9d438b): "eth" is "ethernet",
// "ib" "infiniband".
func normalizeLinkType(s string) string {
	switch s {
	case "eth":
		return "ethernet"
	case "ib":
		return "infiniband"
	}
	return s
}

// policyResyncDelay is the controller's: every event queues one sync a
// second later (SetupWithManager's AddAfter), so a burst publishes once.
const policyResyncDelay = time.Second

// watchPolicies publishes the advertised devices at every change of the
// namespace's policies, until ctx ends. A policy the stand-in refuses ends
// the process (fail).
func watchPolicies(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, o options, devs map[string]vfDevice, publish func([]resourceapi.Device) error, fail func(error)) error {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, o.namespace, nil)
	inf := f.ForResource(policyGVR).Informer()
	kick := make(chan struct{}, 1)
	queue := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: queue, DeleteFunc: queue, UpdateFunc: func(_, n any) { queue(n) }}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("cache not synced")
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(policyResyncDelay):
			}
			if err := syncPolicies(ctx, cs, o, inf.GetStore().List(), devs, publish); err != nil {
				fail(err)
				return
			}
		}
	}()
	return nil
}

func syncPolicies(ctx context.Context, cs kubernetes.Interface, o options, objs []any, devs map[string]vfDevice, publish func([]resourceapi.Device) error) error {
	node, err := cs.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
	if err != nil {
		log.Printf("getting node %s: %v", o.nodeName, err)
		return nil
	}
	var policies []namedPolicy
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var p namedPolicy
		p.name = u.GetName()
		raw, _ := json.Marshal(u.Object["spec"])
		if err := json.Unmarshal(raw, &p.spec); err != nil {
			log.Printf("policy %s: %v", p.name, err)
			continue
		}
		policies = append(policies, p)
	}
	list, err := advertised(devs, policies, node.Labels)
	if err != nil {
		return err
	}
	log.Printf("policy devices resolved: %d of %d devices", len(list), len(devs))
	return publish(list)
}
