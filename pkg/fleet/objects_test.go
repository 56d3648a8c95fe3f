package fleet

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
)

func testFleet(t *testing.T) *config.Fleet {
	t.Helper()
	f := &config.Fleet{Hosts: []config.FleetHost{
		{Node: "host-a", PFs: []string{"0000:3b:00.0", "0000:3b:00.1"}},
		{Node: "host-b", PFs: []string{"0000:5e:00.0", "0000:5e:00.1"}},
	}}
	config.SetFleetDefaults(f)
	if err := config.ValidateFleet(f); err != nil {
		t.Fatal(err)
	}
	return f
}

// Each host's plugin reads the file named for its Node, and that file
// pools exactly the host's PFs, by PCI address, as a config the plugin
// accepts; the plugin runs on those hosts and no other.
func TestDevicePluginPoolsEachHostsPFs(t *testing.T) {
	f := testFleet(t)
	objs, err := Objects(f)
	if err != nil {
		t.Fatal(err)
	}
	var cm *corev1.ConfigMap
	var ds *appsv1.DaemonSet
	var nad *nadv1.NetworkAttachmentDefinition
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.ConfigMap:
			cm = v
		case *appsv1.DaemonSet:
			ds = v
		case *nadv1.NetworkAttachmentDefinition:
			nad = v
		}
	}
	if cm == nil || ds == nil || nad == nil {
		t.Fatalf("objects lack the ConfigMap, DaemonSet or network: %v", objs)
	}
	for _, h := range f.Hosts {
		conf, err := cni.ParseDPConfig([]byte(cm.Data[h.Node]))
		if err != nil {
			t.Fatalf("%s's config: %v", h.Node, err)
		}
		if len(conf.ResourceList) != 1 {
			t.Fatalf("%s's config has %d pools, want 1", h.Node, len(conf.ResourceList))
		}
		r := conf.ResourceList[0]
		only := cni.DPSelector{PCIAddresses: h.PFs}
		if r.ResourcePrefix+"/"+r.ResourceName != f.Resource() || len(r.Selectors) != 1 || !reflect.DeepEqual(r.Selectors[0], only) {
			t.Errorf("%s's pool: %+v, want %s of exactly %v", h.Node, r, f.Resource(), h.PFs)
		}
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--config-file=/etc/pcidp/$(NODE_NAME)") ||
		len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("the plugin does not read its Node's file: args %v, env %v", c.Args, c.Env)
	}
	terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var on []string
	for _, term := range terms {
		for _, m := range term.MatchFields {
			if m.Key == "metadata.name" && m.Operator == corev1.NodeSelectorOpIn && len(m.Values) == 1 {
				on = append(on, m.Values[0])
			}
		}
	}
	if !slices.Equal(on, []string{"host-a", "host-b"}) || len(terms) != 2 {
		t.Errorf("the plugin runs on %+v, want exactly the fleet's hosts, one name a term (the API takes one)", terms)
	}
	var conf map[string]any
	if err := json.Unmarshal([]byte(nad.Spec.Config), &conf); err != nil {
		t.Fatal(err)
	}
	// Only what host-device reads after the PCI address Multus passes: a
	// device, hwaddr or kernelpath would win over it.
	if len(conf) != 3 || conf["type"] != "host-device" || conf["name"] != f.NetworkName ||
		nad.Annotations[cni.ResourceNameAnnotation] != f.Resource() || nad.Namespace != f.JobNamespace {
		t.Errorf("network %s/%s: %v %v", nad.Namespace, nad.Name, nad.Annotations, conf)
	}
}

// A job asks for job.pfs PFs and names the network as often, runs
// privileged with its own Docker, and brings up a lane of that many
// one-PF agents; the host's sysfs is mounted only when asked.
func TestJobPod(t *testing.T) {
	f := testFleet(t)
	f.Job.PFs = 1
	p := JobPod(f)
	c := p.Spec.Containers[0]
	res := corev1.ResourceName(f.Resource())
	if q := c.Resources.Limits[res]; q.Value() != 1 {
		t.Errorf("limit %s=%s, want 1", res, q.String())
	}
	if q := c.Resources.Requests[res]; q.Value() != 1 {
		t.Errorf("request %s=%s, want 1", res, q.String())
	}
	if got := p.Annotations[nadv1.NetworkAttachmentAnnot]; got != "default/sriov-lane-pf" {
		t.Errorf("networks %q", got)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the job is not privileged")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["SRIOV_LANE_AGENTS"] != "1" || env["SRIOV_LANE_PFS_PER_NODE"] != "1" || env["DOCKER_IN_DOCKER_ENABLED"] != "true" {
		t.Errorf("env %v", env)
	}
	if _, ok := env["SRIOV_LANE_SYSFS_ROOT"]; ok {
		t.Errorf("a job on a real host reads its own /sys, not a host path: env %v", env)
	}

	f.Job.PFs = 2
	f.Job.SysfsHostPath = "/var/log/rig/sys"
	p = JobPod(f)
	c = p.Spec.Containers[0]
	if got := p.Annotations[nadv1.NetworkAttachmentAnnot]; got != "default/sriov-lane-pf, default/sriov-lane-pf" {
		t.Errorf("networks %q, want the network twice", got)
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.MountPath == HostSysfs && !m.ReadOnly)
	}
	if !mounted || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SRIOV_LANE_SYSFS_ROOT" && e.Value == HostSysfs }) {
		t.Errorf("sysfsHostPath: mounts %v, env %v", c.VolumeMounts, c.Env)
	}
}

// The Prow presubmit is the pod's spec under the job's name, with the
// networks annotation Prow puts on the pod.
func TestProwPresubmit(t *testing.T) {
	f := testFleet(t)
	job, err := ProwPresubmit(f)
	if err != nil {
		t.Fatal(err)
	}
	ann := job["annotations"].(map[string]any)[nadv1.NetworkAttachmentAnnot].(string)
	if job["name"] != f.Job.Name || strings.Count(ann, f.NetworkName) != f.Job.PFs {
		t.Errorf("presubmit %v", job)
	}
	spec := job["spec"].(map[string]any)
	if len(spec["containers"].([]any)) != 1 {
		t.Errorf("spec %v", spec)
	}
}
