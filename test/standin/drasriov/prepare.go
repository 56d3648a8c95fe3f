package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdiparser "tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/sriov-lane/sriov-lane/test/standin/vfiodev"
)

const (
	cdiClass   = "vf"
	cdiKind    = driverName + "/" + cdiClass
	vfConfigAV = driverName + "/v1alpha1"
	vfioCtl    = "/dev/vfio/vfio"
)

var nadGVR = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

// vfConfig is VfConfig (pkg/api/virtualfunction/v1alpha1/api.go@14490e9d438b).
type vfConfig struct {
	APIVersion            string `json:"apiVersion,omitempty"`
	Kind                  string `json:"kind,omitempty"`
	Driver                string `json:"driver,omitempty"`
	AddVhostMount         bool   `json:"addVhostMount,omitempty"`
	IfName                string `json:"ifName,omitempty"`
	NetAttachDefName      string `json:"netAttachDefName,omitempty"`
	NetAttachDefNamespace string `json:"netAttachDefNamespace,omitempty"`
}

func defaultVfConfig() *vfConfig { return &vfConfig{APIVersion: vfConfigAV, Kind: "VfConfig"} }

// override copies Driver, IfName and NetAttachDefName only, as upstream's
// Override does (AddVhostMount and NetAttachDefNamespace never reach a
// device through it; its api_test.go asserts so).
func (c *vfConfig) override(o *vfConfig) {
	if o.Driver != "" {
		c.Driver = o.Driver
	}
	if o.IfName != "" {
		c.IfName = o.IfName
	}
	if o.NetAttachDefName != "" {
		c.NetAttachDefName = o.NetAttachDefName
	}
}

// preparedDevice is what the stand-in keeps of a prepared VF, in its
// checkpoint and for the NRI hooks.
type preparedDevice struct {
	ClaimNamespace string   `json:"claimNamespace"`
	ClaimName      string   `json:"claimName"`
	ClaimUID       string   `json:"claimUID"`
	PodUID         string   `json:"podUID"`
	Request        string   `json:"request"`
	Pool           string   `json:"pool"`
	Device         string   `json:"device"`
	PCI            string   `json:"pciAddress"`
	IfName         string   `json:"ifName"`
	NetConf        string   `json:"netAttachDefConfig"`
	CDIDeviceIDs   []string `json:"cdiDeviceIDs"`
	Driver         string   `json:"driver"`
}

// plugin is the driver's kubelet plugin and NRI plugin state.
type plugin struct {
	o    options
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	devs map[string]vfDevice
	cdi  *cdiapi.Cache

	mu sync.Mutex
	// pods is the checkpoint: pod UID -> claim UID -> its devices.
	pods map[string]map[string][]preparedDevice
}

func (p *plugin) checkpointPath() string {
	return filepath.Join(p.o.pluginDataDir(), "checkpoint.json")
}

func (p *plugin) loadCheckpoint() error {
	p.pods = map[string]map[string][]preparedDevice{}
	b, err := os.ReadFile(p.checkpointPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, &p.pods)
}

func (p *plugin) saveCheckpoint() error {
	b, err := json.Marshal(p.pods)
	if err != nil {
		return err
	}
	tmp := p.checkpointPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p.checkpointPath())
}

// PrepareResourceClaims is pkg/driver/dra_hook.go@14490e9d438b: each
// claim prepared on its own (interface names vfnet0, vfnet1, ... counted
// across the call), then one pod-level CDI device with
// SRIOVNETWORK_PCI_ADDRESSES of every device prepared for the pod.
func (p *plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	result := map[types.UID]kubeletplugin.PrepareResult{}
	ifIndex := 0
	for _, c := range claims {
		result[c.UID] = p.prepareClaim(ctx, &ifIndex, c)
		if err := result[c.UID].Err; err != nil {
			log.Printf("failed to prepare resource claim %s/%s: %v", c.Namespace, c.Name, err)
		}
	}
	var podUID string
	for _, c := range claims {
		if c != nil && len(c.Status.ReservedFor) > 0 {
			podUID = string(c.Status.ReservedFor[0].UID)
			break
		}
	}
	if podUID == "" {
		return result, fmt.Errorf("no pod info found for prepared claims")
	}
	byClaim, ok := p.pods[podUID]
	if !ok && len(claims) > 0 {
		return result, fmt.Errorf("no prepared devices found for pod %s", podUID)
	}
	var pcis []string
	for _, devs := range byClaim {
		for _, d := range devs {
			pcis = append(pcis, d.PCI)
		}
	}
	spec := &cdispec.Spec{Kind: cdiKind, Devices: []cdispec.Device{{Name: podUID,
		ContainerEdits: cdispec.ContainerEdits{Env: []string{"SRIOVNETWORK_PCI_ADDRESSES=" + strings.Join(pcis, ",")}}}}}
	if err := p.writeSpec(spec, podUID); err != nil {
		return result, fmt.Errorf("error creating global spec file for pod: %w", err)
	}
	return result, nil
}

func (p *plugin) prepareClaim(ctx context.Context, ifIndex *int, claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	id := claim.Namespace + "/" + claim.Name + "/" + string(claim.UID)
	switch {
	case len(claim.Status.ReservedFor) == 0:
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("no pod info found for claim %s", id)}
	case len(claim.Status.ReservedFor) > 1:
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("multiple pods found for claim %s not supported", id)}
	case claim.Status.Allocation == nil:
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim not yet allocated")}
	}
	podUID := string(claim.Status.ReservedFor[0].UID)
	if devs, ok := p.pods[podUID][string(claim.UID)]; ok {
		return kubeletplugin.PrepareResult{Devices: p.kubeletDevices(devs)}
	}
	devs, err := p.prepareDevices(ctx, ifIndex, claim)
	if err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("error preparing devices for claim %v: prepare failed: %w", claim.UID, err)}
	}
	if p.pods[podUID] == nil {
		p.pods[podUID] = map[string][]preparedDevice{}
	}
	p.pods[podUID][string(claim.UID)] = devs
	if err := p.saveCheckpoint(); err != nil {
		delete(p.pods[podUID], string(claim.UID))
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("error setting prepared devices for pod %s into pod manager: %w", podUID, err)}
	}
	// The applied configs go into the claim's status, retried on
	// conflicts with a fresh claim; a failure is only logged, as upstream.
	status := claim.Status.Devices
	err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100e6, Factor: 2, Steps: 5}, func(ctx context.Context) (bool, error) {
		_, uerr := p.cs.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if apierrors.IsConflict(uerr) {
			if fresh, gerr := p.cs.ResourceV1().ResourceClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{}); gerr == nil {
				fresh.Status.Devices = status
				claim = fresh
			}
		}
		return uerr == nil, nil
	})
	if err != nil {
		log.Printf("failed to update claim status of %s: %v", id, err)
	}
	return kubeletplugin.PrepareResult{Devices: p.kubeletDevices(devs)}
}

func (p *plugin) kubeletDevices(devs []preparedDevice) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(devs))
	for _, d := range devs {
		kd := kubeletplugin.Device{Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Device, CDIDeviceIDs: d.CDIDeviceIDs}
		if p.o.enableDeviceMetadata {
			attrs := map[string]resourceapi.DeviceAttribute{}
			if v, ok := p.devs[d.Device]; ok {
				for k, a := range v.device.Attributes {
					attrs[string(k)] = a
				}
			}
			if d.IfName != "" {
				ifName := d.IfName
				attrs[driverName+"/interfaceName"] = resourceapi.DeviceAttribute{StringValue: &ifName}
			}
			kd.Metadata = &kubeletplugin.DeviceMetadata{Attributes: attrs}
		}
		out = append(out, kd)
	}
	return out
}

// configs is pkg/devicestate/statehelpers.go@14490e9d438b
// getMapOfOpaqueDeviceConfigForDevice: class configs, then claim configs,
// later ones overriding, per request named; other drivers' opaque configs
// skipped; a non-opaque config, or parameters that are not a VfConfig
// decoded strictly, refused.
func configs(all []resourceapi.DeviceAllocationConfiguration) (map[string]*vfConfig, error) {
	var class, claim []resourceapi.DeviceAllocationConfiguration
	for _, c := range all {
		switch c.Source {
		case resourceapi.AllocationConfigSourceClass:
			class = append(class, c)
		case resourceapi.AllocationConfigSourceClaim:
			claim = append(claim, c)
		default:
			return nil, fmt.Errorf("invalid config source: %v", c.Source)
		}
	}
	out := map[string]*vfConfig{}
	for _, c := range append(class, claim...) {
		if c.Opaque == nil {
			return nil, fmt.Errorf("only opaque parameters are supported by this driver")
		}
		if c.Opaque.Driver != driverName {
			continue
		}
		var v vfConfig
		dec := json.NewDecoder(bytes.NewReader(c.Opaque.Parameters.Raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("error decoding config parameters: %w", err)
		}
		if v.APIVersion != vfConfigAV || v.Kind != "VfConfig" {
			return nil, fmt.Errorf("error decoding config parameters: no kind %q is registered for version %q", v.Kind, v.APIVersion)
		}
		for _, r := range c.Requests {
			if out[r] == nil {
				out[r] = defaultVfConfig()
			}
			out[r].override(&v)
		}
	}
	return out, nil
}

// prepareDevices is pkg/devicestate/state.go@14490e9d438b
// PrepareDevicesForClaim for STANDALONE: per result of this driver, its
// config (default: none), the NAD's config with the VF's deviceID, the
// driver binding, the CDI device (SRIOVNETWORK_VF_DEVICE_<name>,
// SRIOVNETWORK_NET_ATTACH_DEF_NAME; for driver vfio-pci the group and
// container devices), the interface name; the claim's CDI spec last.
func (p *plugin) prepareDevices(ctx context.Context, ifIndex *int, claim *resourceapi.ResourceClaim) ([]preparedDevice, error) {
	cfgs, err := configs(claim.Status.Allocation.Devices.Config)
	if err != nil {
		return nil, fmt.Errorf("error creating map of opaque device config for device: %v", err)
	}
	var out []preparedDevice
	spec := &cdispec.Spec{Kind: cdiKind}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driverName {
			continue
		}
		cfg, ok := cfgs[r.Request]
		if !ok {
			cfg = defaultVfConfig()
		}
		vf, ok := p.devs[r.Device]
		if !ok {
			return nil, fmt.Errorf("error applying config on device: device %s not found in allocatable devices", r.Device)
		}
		ns := claim.Namespace
		if cfg.NetAttachDefNamespace != "" {
			ns = cfg.NetAttachDefNamespace
		}
		netConf, err := p.nadConfig(ctx, ns, cfg.NetAttachDefName, vf.pci)
		if err != nil {
			return nil, fmt.Errorf("error applying config on device: %w", err)
		}
		if err := p.checkDriver(vf.pci, cfg.Driver); err != nil {
			return nil, fmt.Errorf("error applying config on device: error binding device %s to driver: %w", vf.pci, err)
		}
		envName := strings.ReplaceAll(r.Device, "-", "_")
		edits := cdispec.ContainerEdits{Env: []string{
			"SRIOVNETWORK_VF_DEVICE_" + envName + "=" + vf.pci,
			"SRIOVNETWORK_NET_ATTACH_DEF_NAME=" + cfg.NetAttachDefName,
		}}
		if cfg.Driver == "vfio-pci" {
			nodes, container, err := p.vfioNodes(vf.pci)
			if err != nil {
				return nil, fmt.Errorf("error applying config on device: error getting VFIO device file for device %s: %w", vf.pci, err)
			}
			edits.DeviceNodes = nodes
			edits.Env = append(edits.Env, "SRIOVNETWORK_"+envName+"_VFIO_DEVICE="+container)
		}
		ifName := cfg.IfName
		if ifName == "" {
			ifName = fmt.Sprintf("%s%d", p.o.ifPrefix, *ifIndex)
			*ifIndex++
		}
		cdiName := string(claim.UID) + "-" + r.Device
		spec.Devices = append(spec.Devices, cdispec.Device{Name: cdiName, ContainerEdits: edits})
		raw, _ := json.Marshal(cfg)
		claim.Status.Devices = append(claim.Status.Devices, resourceapi.AllocatedDeviceStatus{
			Device: r.Device, Pool: r.Pool, Driver: r.Driver, Data: &runtime.RawExtension{Raw: raw},
		})
		out = append(out, preparedDevice{
			ClaimNamespace: claim.Namespace, ClaimName: claim.Name, ClaimUID: string(claim.UID),
			PodUID: string(claim.Status.ReservedFor[0].UID), Request: r.Request, Pool: r.Pool, Device: r.Device,
			PCI: vf.pci, IfName: ifName, NetConf: netConf, Driver: cfg.Driver,
			CDIDeviceIDs: []string{
				cdiparser.QualifiedName(driverName, cdiClass, cdiName),
				cdiparser.QualifiedName(driverName, cdiClass, string(claim.Status.ReservedFor[0].UID)),
			},
		})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no prepared devices found for claim")
	}
	if err := p.writeSpec(spec, string(claim.UID)); err != nil {
		return nil, fmt.Errorf("unable to create CDI spec file for claim: %v", err)
	}
	return out, nil
}

// nadConfig is getNetAttachDefRawConfig and AddDeviceIDToNetConf: in
// STANDALONE every claim names a NetworkAttachmentDefinition, whose config
// gets the VF's PCI address as "deviceID".
func (p *plugin) nadConfig(ctx context.Context, ns, name, pci string) (string, error) {
	nad, err := p.dyn.Resource(nadGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("error getting net attach def raw config: error getting net attach def for net attach def %s/%s: %w", ns, name, err)
	}
	raw, _, _ := unstructured.NestedString(nad.Object, "spec", "config")
	var conf map[string]any
	if err := json.Unmarshal([]byte(raw), &conf); err != nil {
		return "", fmt.Errorf("error converting net attach def config to sriov-cni format: failed to unmarshal existing config: %w", err)
	}
	conf["deviceID"] = pci
	b, err := json.Marshal(conf)
	return string(b), err
}

// checkDriver is BindDeviceDriver for the bindings the lane makes: no
// driver asked, nothing done; the driver the VF is already bound to,
// nothing done ("device already bound to driver"). The stand-in refuses a
// binding it would have to change: the lane binds every VF at up.
func (p *plugin) checkDriver(pci, driver string) error {
	if driver == "" {
		return nil
	}
	cur := ""
	if t, err := os.Readlink(filepath.Join(p.o.sysRoot, "bus", "pci", "devices", pci, "driver")); err == nil {
		cur = filepath.Base(t)
	}
	if cur == driver || (driver == "default" && cur != "" && !isDPDKDriver(cur)) {
		return nil
	}
	return fmt.Errorf("stand-in: rebinding %s from %q to %q is not implemented", pci, cur, driver)
}

// isDPDKDriver is pkg/host/host.go@14490e9d438b IsDpdkDriver.
func isDPDKDriver(d string) bool { return d == "vfio-pci" || d == "uio_pci_generic" || d == "igb_uio" }

// vfioNodes is GetVFIODeviceFile and the two device nodes: the VF's
// iommu_group must be a link; the container path is /dev/vfio/<group>,
// the host path the same or /dev/vfio/noiommu-<group> when the group's
// name is vfio-noiommu; /dev/vfio/vfio beside it.
//
// Deviation, as the device plugin stand-in's: the rig has no VFIO
// character devices, so the host paths are character devices the
// stand-in makes with /dev/null's numbers under its plugin data dir.
func (p *plugin) vfioNodes(pci string) ([]*cdispec.DeviceNode, string, error) {
	link := filepath.Join(p.o.sysRoot, "bus", "pci", "devices", pci, "iommu_group")
	fi, err := os.Lstat(link)
	if err != nil {
		return nil, "", fmt.Errorf("GetVFIODeviceFile(): unable to find iommu_group %v", err)
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		return nil, "", fmt.Errorf("GetVFIODeviceFile(): invalid symlink to iommu_group %v", nil)
	}
	// Upstream resolves the link (EvalSymlinks) to /sys/kernel/iommu_groups/<group>;
	// the stand-in reads its last element and finds the group there under
	// its sysfs root, which it reaches through /proc/1/root, a link that
	// resolving would follow out of the pod's view.
	target, err := os.Readlink(link)
	if err != nil {
		return nil, "", fmt.Errorf("GetVFIODeviceFile(): error reading symlink to iommu_group %v", err)
	}
	group := filepath.Base(target)
	hostName := group
	if readTrim(filepath.Join(p.o.sysRoot, "kernel", "iommu_groups", group, "name")) == "vfio-noiommu" {
		hostName = "noiommu-" + group
	}
	nodes := filepath.Join(p.o.pluginDataDir(), "standin-vfio")
	groupDev, err := vfiodev.Node(nodes, "/dev/null", hostName)
	if err != nil {
		return nil, "", err
	}
	ctl, err := vfiodev.Node(nodes, "/dev/null", "vfio")
	if err != nil {
		return nil, "", err
	}
	container := "/dev/vfio/" + group
	return []*cdispec.DeviceNode{
		{Path: container, HostPath: groupDev, Type: "c"},
		{Path: vfioCtl, HostPath: ctl, Type: "c"},
	}, container, nil
}

// writeSpec writes a transient CDI spec as pkg/cdi/cdi.go@14490e9d438b
// does, through the CDI cache, named for the claim or pod UID.
func (p *plugin) writeSpec(spec *cdispec.Spec, uid string) error {
	v, err := cdiapi.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("failed to get minimum required CDI spec version: %v", err)
	}
	spec.Version = v
	return p.cdi.WriteSpec(spec, cdiapi.GenerateTransientSpecName(driverName, cdiClass, uid))
}

func (p *plugin) removeSpec(uid string) error {
	return p.cdi.RemoveSpec(cdiapi.GenerateTransientSpecName(driverName, cdiClass, uid))
}

// UnprepareResourceClaims is dra_hook.go's: a claim not prepared here is
// done; else its claim and pod CDI specs go, and it leaves the checkpoint.
// No driver is restored: the stand-in changes none (checkDriver).
func (p *plugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[types.UID]error{}
	for _, c := range claims {
		var errs []error
		for pod, byClaim := range p.pods {
			devs, ok := byClaim[string(c.UID)]
			if !ok {
				continue
			}
			if err := p.removeSpec(string(c.UID)); err != nil {
				errs = append(errs, fmt.Errorf("unable to delete CDI spec file for PodUID: %v", err))
			}
			if len(devs) > 0 {
				if err := p.removeSpec(devs[0].PodUID); err != nil {
					errs = append(errs, fmt.Errorf("unable to delete CDI spec file for PodUID: %v", err))
				}
			}
			delete(byClaim, string(c.UID))
			if len(byClaim) == 0 {
				delete(p.pods, pod)
			}
			if err := p.saveCheckpoint(); err != nil {
				errs = append(errs, fmt.Errorf("error deleting claim %s from pod manager: %w", c.UID, err))
			}
		}
		if len(errs) > 0 {
			out[c.UID] = fmt.Errorf("error unpreparing devices for claim %v: %w", c.UID, errors.Join(errs...))
		} else {
			out[c.UID] = nil
		}
	}
	return out, nil
}

// WatchHealthStatus is never called (HealthService(false)).
func (p *plugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

func (p *plugin) HandleError(_ context.Context, err error, msg string) {
	log.Printf("%s: %v", msg, err)
}

// devicesOfPod are the devices prepared for a pod, for the NRI hooks.
func (p *plugin) devicesOfPod(uid string) []preparedDevice {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []preparedDevice
	for _, devs := range p.pods[uid] {
		out = append(out, devs...)
	}
	return out
}
