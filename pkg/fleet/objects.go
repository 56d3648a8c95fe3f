package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// Names of the fleet's own objects.
const (
	DevicePluginDaemonSet = "sriov-lane-fleet-device-plugin"
	devicePluginConfigMap = "sriov-lane-fleet-dp-config"
	devicePluginSA        = "sriov-lane-fleet-device-plugin"
	// JobLabel marks the job pods the template makes.
	JobLabel = "sriov-lane.io/fleet-job"
	// jobContainer is the job pod's one container.
	jobContainer = "job"
	// HostSysfs is where a job mounts job.sysfsHostPath.
	HostSysfs = "/host/sys"
)

// Upstream files the fleet's objects follow: the device plugin's DaemonSet
// as the lane's (pkg/cni), the host-device plugin's config keys, and the
// shape of KubeVirt's SR-IOV presubmits, which this replaces.
const (
	HostDeviceUpstream = "containernetworking/plugins plugins/main/host-device/host-device.go@v1.9.1"
	PresubmitUpstream  = "kubevirt/project-infra github/ci/prow-deploy/files/jobs/kubevirt/kubevirt/kubevirt-presubmits-1.9.yaml@2c863fd1"
)

// Objects are what a fleet's cluster needs for its jobs to take whole
// PFs: the device plugin's namespace, its ServiceAccount, ConfigMap and
// DaemonSet, and the host-device NetworkAttachmentDefinition a job names
// once per PF. No Role is made: the device plugin speaks only to its
// kubelet (sriov-network-device-plugin deployments/sriovdp-daemonset.yaml@v3.11.0
// gives its ServiceAccount none), the host-device plugin runs under Multus's
// own, and a job needs nothing of the API.
func Objects(f *config.Fleet) ([]runtime.Object, error) {
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: cni.ObjectMeta(f.Namespace, "", nil)}
	dp, err := devicePlugin(f).Objects()
	if err != nil {
		return nil, err
	}
	nad, err := network(f)
	if err != nil {
		return nil, err
	}
	return append(append([]runtime.Object{ns}, dp...), nad), nil
}

// devicePlugin is the fleet's device plugin: on each host, one pool of the
// PFs its entry lists, by PCI address. A PF with VFs is no device (the
// plugin leaves SR-IOV PFs with sriov_numvfs > 0 out:
// sriov-network-device-plugin pkg/netdevice/netDeviceProvider.go@v3.11.0
// AddTargetDevices), so a PF joins while it has none. PCI addresses
// because a PF's name drifts (host-device renames it into the pod and a
// PF the kernel returns from a dead netns keeps the pod's name or becomes
// devN), and pfNames and rootDevices never select a PF, only VFs
// (pkg/resources/deviceSelectors.go@v3.11.0 pfNameSelector and
// rootDeviceSelector skip a device without physfn). One file per host,
// named for its Node, as the plugin reads one config: an address listed
// for one host selects nothing on another.
func devicePlugin(f *config.Fleet) cni.DevicePlugin {
	configs := map[string]cni.DPConfig{}
	var nodes []string
	for _, h := range f.Hosts {
		configs[h.Node] = cni.DPConfig{ResourceList: []cni.DPResource{{
			ResourceName:   f.ResourceName,
			ResourcePrefix: f.ResourcePrefix,
			DeviceType:     cni.DeviceTypeNetDevice,
			Selectors:      cni.DPSelectors{{PCIAddresses: append([]string(nil), h.PFs...)}},
		}}}
		nodes = append(nodes, h.Node)
	}
	return cni.DevicePlugin{
		Namespace:      f.Namespace,
		DaemonSet:      DevicePluginDaemonSet,
		ConfigMap:      devicePluginConfigMap,
		ServiceAccount: devicePluginSA,
		PodName:        DevicePluginDaemonSet,
		Image:          cni.MirrorImage(f.ImageRegistryMirror, cni.DevicePluginImage),
		ResourcePrefix: f.ResourcePrefix,
		Configs:        configs,
		ConfigFile:     "$(NODE_NAME)",
		Nodes:          nodes,
	}
}

// hostDeviceConf is the host-device plugin's config as the fleet writes it:
// no device, hwaddr or kernelpath, which the plugin would take before the
// PCI address Multus passes from the device plugin's allocation
// (getLink's order, containernetworking/plugins
// plugins/main/host-device/host-device.go@v1.9.1), and no IPAM: a job's
// lane moves the PF on into a node and addresses nothing on it.
type hostDeviceConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
}

// network is the NetworkAttachmentDefinition of one PF: Multus gives the
// n-th element of a pod's networks that names it the n-th PCI address
// allocated for its resource (k8snetworkplumbingwg/multus-cni
// pkg/k8sclient/k8sclient.go@v4.3.0 getKubernetesDelegate), as pciBusID,
// and host-device moves that PF into the pod and back on DEL.
func network(f *config.Fleet) (*nadv1.NetworkAttachmentDefinition, error) {
	conf, err := json.Marshal(hostDeviceConf{CNIVersion: "1.0.0", Name: f.NetworkName, Type: "host-device"})
	if err != nil {
		return nil, fmt.Errorf("encoding the fleet's network config: %w", err)
	}
	m := cni.ObjectMeta(f.NetworkName, f.JobNamespace, nil)
	m.Annotations = map[string]string{cni.ResourceNameAnnotation: f.Resource()}
	return &nadv1.NetworkAttachmentDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: nadv1.SchemeGroupVersion.String(), Kind: "NetworkAttachmentDefinition"},
		ObjectMeta: m,
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: string(conf)},
	}, nil
}

// defaultJobCommand brings the job's lane up on the PFs in the pod, checks
// it and takes it down, keeping up's or verify's exit status.
var defaultJobCommand = []string{"/bin/sh", "-c", "sriov-lane up && sriov-lane verify; rc=$?; sriov-lane down; exit $rc"}

// JobPod is one job: privileged, asking for job.pfs whole PFs and naming
// the fleet's network as often, so the PFs the kubelet allocates are moved
// into its network namespace, where its `sriov-lane up` takes exactly
// them (PFs elsewhere are not in its netns, and up takes none of those).
// It runs its own Docker, as Prow's DinD jobs do (DOCKER_IN_DOCKER_ENABLED
// and /docker-graph, kubernetes/test-infra's preset-dind-enabled), and
// mounts /dev/vfio for the VFs it binds to vfio-pci. Its lane has job.pfs
// agents of one PF each.
func JobPod(f *config.Fleet) *corev1.Pod {
	n := strconv.Itoa(f.Job.PFs)
	pfs := resource.MustParse(n)
	res := corev1.ResourceName(f.Resource())
	nets := make([]string, f.Job.PFs)
	for i := range nets {
		nets[i] = f.JobNamespace + "/" + f.NetworkName
	}
	cmd := f.Job.Command
	if len(cmd) == 0 {
		cmd = defaultJobCommand
	}
	env := []corev1.EnvVar{
		{Name: "DOCKER_IN_DOCKER_ENABLED", Value: "true"},
		{Name: "SRIOV_LANE_AGENTS", Value: n},
		{Name: "SRIOV_LANE_PFS_PER_NODE", Value: "1"},
	}
	mounts := []corev1.VolumeMount{
		{Name: "docker-graph", MountPath: "/docker-graph"},
		{Name: "vfio", MountPath: "/dev/vfio"},
	}
	volumes := []corev1.Volume{
		{Name: "docker-graph", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		cni.HostPathVolume("vfio", "/dev/vfio", corev1.HostPathDirectory),
	}
	if p := f.Job.SysfsHostPath; p != "" {
		env = append(env, corev1.EnvVar{Name: "SRIOV_LANE_SYSFS_ROOT", Value: HostSysfs})
		mounts = append(mounts, corev1.VolumeMount{Name: "sysfs", MountPath: HostSysfs})
		volumes = append(volumes, cni.HostPathVolume("sysfs", p, corev1.HostPathDirectory))
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: f.Job.Name + "-",
			Namespace:    f.JobNamespace,
			Labels:       map[string]string{JobLabel: "true"},
			Annotations:  map[string]string{nadv1.NetworkAttachmentAnnot: strings.Join(nets, ", ")},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            jobContainer,
				Image:           f.Job.Image,
				Command:         cmd,
				Env:             env,
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{res: pfs},
					Limits:   corev1.ResourceList{res: pfs},
				},
				VolumeMounts: mounts,
			}},
			Volumes: volumes,
		},
	}
}

// ProwPresubmit is the job as a Prow presubmit a job config can paste under
// presubmits.<org/repo>: the pod's labels, its annotation (Prow puts a
// job's annotations on its pod, as KubeVirt's SR-IOV presubmits rely on
// for theirs) and its spec. Unlike those, it needs no anti-affinity and no
// node label: the scheduler places it where job.pfs PFs are free.
func ProwPresubmit(f *config.Fleet) (map[string]any, error) {
	p, err := cni.ToUnstructured(JobPod(f))
	if err != nil {
		return nil, err
	}
	spec, _, err := unstructured.NestedMap(p.Object, "spec")
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"name":        f.Job.Name,
		"decorate":    true,
		"always_run":  false,
		"labels":      map[string]any{JobLabel: "true"},
		"annotations": map[string]any{nadv1.NetworkAttachmentAnnot: p.GetAnnotations()[nadv1.NetworkAttachmentAnnot]},
		"spec":        spec,
	}, nil
}

// Render writes Objects as `fleet render` prints them, in format (yaml or
// json), so the command and the committed manifests are one rendering.
func Render(w io.Writer, f *config.Fleet, format string) error {
	objs, err := Objects(f)
	if err != nil {
		return err
	}
	us, err := cni.ToUnstructuredList(objs)
	if err != nil {
		return err
	}
	return cni.Render(w, us, format)
}

// JobYAML is the job as `fleet job` prints it: the pod, or with prow the
// presubmit as a one-item list, ready to paste under presubmits.<org/repo>.
func JobYAML(f *config.Fleet, prow bool) ([]byte, error) {
	var doc any
	if prow {
		job, err := ProwPresubmit(f)
		if err != nil {
			return nil, err
		}
		doc = []any{job}
	} else {
		u, err := cni.ToUnstructured(JobPod(f))
		if err != nil {
			return nil, err
		}
		doc = u.Object
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the job: %w", err)
	}
	return b, nil
}
