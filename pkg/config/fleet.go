package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// FleetKind is the kind of a fleet file.
const FleetKind = "Fleet"

// Fleet defaults. The resource is whole PFs, not VFs, so it has a name of
// its own; the prefix is the project's (a CI cluster's other SR-IOV pools
// keep theirs).
const (
	DefaultFleetNamespace      = "sriov-lane-fleet"
	DefaultFleetJobNamespace   = "default"
	DefaultFleetResourcePrefix = "sriov-lane.io"
	DefaultFleetResourceName   = "pf"
	DefaultFleetNetworkName    = "sriov-lane-pf"
	DefaultFleetJobName        = "sriov-lane-job"
	DefaultFleetJobPFs         = 2
	// FleetJobImagePlaceholder stands in the rendered job for the CI's own
	// image, which must hold sriov-lane and a Docker a job can start.
	FleetJobImagePlaceholder = "JOB-IMAGE-WITH-SRIOV-LANE"
)

// Fleet is what `sriov-lane fleet render` makes a fleet's objects from: a
// CI cluster whose SR-IOV hosts hand whole PFs to job pods, counted by the
// device plugin and kubelet, moved by Multus and the host-device plugin.
type Fleet struct {
	// APIVersion is sriov-lane.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind is Fleet.
	Kind string `json:"kind"`
	// Namespace holds the device plugin, its ConfigMap and ServiceAccount.
	Namespace string `json:"namespace"`
	// JobNamespace is where the jobs' pods run (Prow's pod namespace); the
	// NetworkAttachmentDefinition is made there.
	JobNamespace string `json:"jobNamespace"`
	// ResourcePrefix and ResourceName make the extended resource a job
	// requests, <prefix>/<name>: one unit is one whole PF.
	ResourcePrefix string `json:"resourcePrefix"`
	ResourceName   string `json:"resourceName"`
	// NetworkName is the host-device NetworkAttachmentDefinition a job
	// names once per PF.
	NetworkName string `json:"networkName"`
	// ImageRegistryMirror, as a lane's, is put before the device plugin's
	// image (the job's image is the CI's own, taken as written).
	ImageRegistryMirror string `json:"imageRegistryMirror,omitempty"`
	// Hosts are the SR-IOV hosts, each with the PFs jobs may take there.
	Hosts []FleetHost `json:"hosts"`
	// Job is the job template's settings.
	Job FleetJob `json:"job"`
}

// FleetHost is one SR-IOV host of the fleet.
type FleetHost struct {
	// Node is the host's Kubernetes Node name.
	Node string `json:"node"`
	// PFs are the PCI addresses of the PFs jobs may take there (what
	// `sriov-lane check` lists as candidates on the host). Nothing else
	// joins the pool: not the uplink, not a PF left out of this list.
	PFs []string `json:"pfs"`
}

// FleetJob is what the job template asks for and runs.
type FleetJob struct {
	// Name is the job pod's name prefix (generateName) and the Prow job's
	// name.
	Name string `json:"name"`
	// PFs is how many PFs each job takes: the resource request and as many
	// network attachments. The job's lane spreads them over
	// PFs agents of one PF each.
	PFs int `json:"pfs"`
	// Image is the job's image: it holds sriov-lane and the job's own
	// Docker (as Prow's DinD images do).
	Image string `json:"image"`
	// Command is the job's command; empty, `sriov-lane up`, then down.
	Command []string `json:"command,omitempty"`
	// SysfsHostPath, when set, is a host directory mounted read-write in
	// the job at /host/sys and handed to sriov-lane as its sysfsRoot. A
	// real host needs none: a privileged pod's own /sys is mounted in its
	// network namespace and shows the PFs moved into it, where a hostPath
	// of the host's /sys shows the host's.
	SysfsHostPath string `json:"sysfsHostPath,omitempty"`
}

// SetFleetDefaults fills every unset field of f.
func SetFleetDefaults(f *Fleet) {
	orString(&f.APIVersion, APIVersion)
	orString(&f.Kind, FleetKind)
	orString(&f.Namespace, DefaultFleetNamespace)
	orString(&f.JobNamespace, DefaultFleetJobNamespace)
	orString(&f.ResourcePrefix, DefaultFleetResourcePrefix)
	orString(&f.ResourceName, DefaultFleetResourceName)
	orString(&f.NetworkName, DefaultFleetNetworkName)
	orString(&f.Job.Name, DefaultFleetJobName)
	orString(&f.Job.Image, FleetJobImagePlaceholder)
	orInt(&f.Job.PFs, DefaultFleetJobPFs)
}

// Resource is the extended resource a job requests, <prefix>/<name>.
func (f *Fleet) Resource() string { return f.ResourcePrefix + "/" + f.ResourceName }

// pciRE is a PCI address as sysfs names it, domain:bus:device.function.
var pciRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)

// ValidateFleet checks f, returning every problem at once.
func ValidateFleet(f *Fleet) error {
	var errs []error
	add := func(e *InvalidError) { errs = append(errs, e) }
	if f.APIVersion != APIVersion {
		add(invalid("apiVersion", "use "+APIVersion, "%q is not supported", f.APIVersion))
	}
	if f.Kind != FleetKind {
		add(invalid("kind", "use "+FleetKind, "%q is not supported", f.Kind))
	}
	for _, ns := range []struct{ field, v string }{{"namespace", f.Namespace}, {"jobNamespace", f.JobNamespace}, {"networkName", f.NetworkName}} {
		if !nameRE.MatchString(ns.v) || len(ns.v) > 63 {
			add(invalid(ns.field, "a DNS label: lower-case letters, digits and '-'", "%q", ns.v))
		}
	}
	if !dnsSubRE.MatchString(f.ResourcePrefix) {
		add(invalid("resourcePrefix", "a DNS subdomain such as sriov-lane.io", "%q", f.ResourcePrefix))
	}
	if !resNameRE.MatchString(f.ResourceName) || len(f.ResourceName) > maxResNameLen {
		add(invalid("resourceName", "letters, digits, '_' and '-', starting and ending with a letter or digit, e.g. pf", "%q", f.ResourceName))
	}
	if m := strings.TrimSpace(f.ImageRegistryMirror); m != "" {
		if err := checkMirror(m); err != nil {
			add(invalid("imageRegistryMirror", "[http://|https://]HOST[:PORT]", "%q: %v", m, err))
		}
	}
	if len(f.Hosts) == 0 {
		add(invalid("hosts", "one entry per SR-IOV host: its node name and the PCI addresses of its PFs (sriov-lane check on the host lists them)", "none"))
	}
	nodes := map[string]bool{}
	for i, h := range f.Hosts {
		at := fmt.Sprintf("hosts[%d]", i)
		if !dnsSubRE.MatchString(h.Node) || len(h.Node) > 253 {
			add(invalid(at+".node", "the host's Node name", "%q", h.Node))
		} else if nodes[h.Node] {
			add(invalid(at+".node", "one entry per host", "%q is listed twice", h.Node))
		}
		nodes[h.Node] = true
		if len(h.PFs) == 0 {
			add(invalid(at+".pfs", "the PCI addresses of the PFs jobs may take there, e.g. 0000:3b:00.0", "none"))
		}
		for j, p := range h.PFs {
			if !pciRE.MatchString(p) {
				add(invalid(fmt.Sprintf("%s.pfs[%d]", at, j), "a PCI address as sysfs names it, e.g. 0000:3b:00.0", "%q", p))
			} else if slices.Index(h.PFs, p) != j {
				add(invalid(fmt.Sprintf("%s.pfs[%d]", at, j), "each PF once", "%q is listed twice", p))
			}
		}
	}
	if f.Job.PFs < 1 {
		add(invalid("job.pfs", "at least 1 PF a job", "%d", f.Job.PFs))
	} else if most := f.mostPFs(); len(f.Hosts) > 0 && f.Job.PFs > most {
		add(invalid("job.pfs", "no job larger than the host with most PFs", "%d PFs, and no host has more than %d: the jobs would stay Pending", f.Job.PFs, most))
	}
	if !nameRE.MatchString(f.Job.Name) || len(f.Job.Name) > 50 {
		add(invalid("job.name", "lower-case letters, digits and '-', at most 50 characters", "%q", f.Job.Name))
	}
	if strings.TrimSpace(f.Job.Image) == "" {
		add(invalid("job.image", "the CI's job image, holding sriov-lane", "empty"))
	}
	if p := f.Job.SysfsHostPath; p != "" && !filepath.IsAbs(p) {
		add(invalid("job.sysfsHostPath", "an absolute path on the host", "%q", p))
	}
	return errors.Join(errs...)
}

func (f *Fleet) mostPFs() int {
	most := 0
	for _, h := range f.Hosts {
		most = max(most, len(h.PFs))
	}
	return most
}

// LoadFleet reads a fleet file, refusing unknown fields, then defaults and
// validates it.
func LoadFleet(path string) (*Fleet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading fleet file: %w", err)
	}
	f := &Fleet{}
	if err := decodeStrict(b, f, "a fleet file"); err != nil {
		return nil, &InvalidError{Field: "fleet file " + path, Problem: err.Error()}
	}
	SetFleetDefaults(f)
	if err := ValidateFleet(f); err != nil {
		return nil, err
	}
	return f, nil
}
