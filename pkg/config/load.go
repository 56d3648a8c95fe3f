package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Setting is one configuration knob reachable from flags and the environment.
// The table below is the single list of them, so the flag, its environment
// variables and the file field can never drift apart.
type Setting struct {
	Flag  string
	Field string   // the file's field, as a dotted path of YAML keys
	Env   []string // highest precedence first
	Type  string
	Usage string
	set   func(l *Lane, v string) error
}

func intSetter(field string, p func(*Lane) *int) func(*Lane, string) error {
	return func(l *Lane, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return invalid(field, "a whole number", "%q", v)
		}
		*p(l) = n
		return nil
	}
}

// boolSetter takes a set function rather than a pointer, as some booleans
// are pointers themselves (unset is not false).
func boolSetter(field string, set func(l *Lane, b bool)) func(*Lane, string) error {
	return func(l *Lane, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return invalid(field, "true or false", "%q", v)
		}
		set(l, b)
		return nil
	}
}

func strSetter(p func(*Lane) *string) func(*Lane, string) error {
	return func(l *Lane, v string) error { *p(l) = v; return nil }
}

func listSetter(p func(*Lane) *[]string) func(*Lane, string) error {
	return func(l *Lane, v string) error {
		*p(l) = splitList(v)
		return nil
	}
}

// splitList accepts comma- or space-separated lists (kubevirtci's
// PF_BLACKLIST is space-separated).
func splitList(v string) []string {
	fields := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
	if len(fields) == 0 {
		// nil, as a list never set: FieldsFunc gives an empty slice.
		return nil
	}
	return fields
}

// Settings returns the table of flag/env settings.
func Settings() []Setting {
	return []Setting{
		{"name", "name", []string{"SRIOV_LANE_NAME", "CLUSTER_NAME"}, "string", "lane and k3d cluster name", strSetter(func(l *Lane) *string { return &l.Name })},
		{"agents", "agents", []string{"SRIOV_LANE_AGENTS"}, "int", "number of k3s agents", intSetter("agents", func(l *Lane) *int { return &l.Agents })},
		{"pfs-per-node", "pfsPerNode", []string{"SRIOV_LANE_PFS_PER_NODE", "PF_COUNT_PER_NODE"}, "int", "PFs moved into each agent", intSetter("pfsPerNode", func(l *Lane) *int { return &l.PFsPerNode })},
		{"vfs-per-pf", "vfsPerPF", []string{"SRIOV_LANE_VFS_PER_PF"}, "int", "VFs created on each PF", intSetter("vfsPerPF", func(l *Lane) *int { return &l.VFsPerPF })},
		{"vf-driver", "vfDriver", []string{"SRIOV_LANE_VF_DRIVER"}, "string", "vfio-pci or netdevice", strSetter(func(l *Lane) *string { return &l.VFDriver })},
		{"vf-allocation", "vfAllocation", []string{"SRIOV_LANE_VF_ALLOCATION", "KUBEVIRT_USE_DRA"}, "string", "how pods get VFs: devicePlugin or dra (KUBEVIRT_USE_DRA=true means dra)", strSetter(func(l *Lane) *string { return &l.VFAllocation })},
		{"resource-prefix", "resourcePrefix", []string{"SRIOV_LANE_RESOURCE_PREFIX"}, "string", "extended resource prefix", strSetter(func(l *Lane) *string { return &l.ResourcePrefix })},
		{"resource-name", "resourceName", []string{"SRIOV_LANE_RESOURCE_NAME"}, "string", "extended resource name", strSetter(func(l *Lane) *string { return &l.ResourceName })},
		{"node-label", "nodeLabel", []string{"SRIOV_LANE_NODE_LABEL"}, "string", "key=value label for agents with PFs", strSetter(func(l *Lane) *string { return &l.NodeLabel })},
		{"cni", "cni", []string{"SRIOV_LANE_CNI"}, "string", "flannel or calico", strSetter(func(l *Lane) *string { return &l.CNI })},
		{"ip-family", "ipFamily", []string{"SRIOV_LANE_IP_FAMILY", "IPFAMILY"}, "string", "cluster IP family: ipv4, ipv6 or dual", strSetter(func(l *Lane) *string { return &l.IPFamily })},
		{"container-engine", "containerEngine", []string{"SRIOV_LANE_CONTAINER_ENGINE", "CRI_BIN", "KUBEVIRTCI_RUNTIME"}, "string", "docker or podman; unset: DOCKER_HOST's engine, else Docker's socket, else rootful Podman's", strSetter(func(l *Lane) *string { return &l.ContainerEngine })},
		{"k3s-image", "k3sImage", []string{"SRIOV_LANE_K3S_IMAGE"}, "string", "k3s node image", strSetter(func(l *Lane) *string { return &l.K3sImage })},
		{"tools-image", "toolsImage", []string{"SRIOV_LANE_TOOLS_IMAGE"}, "string", "k3d tools image (mirrors, air-gapped hosts)", strSetter(func(l *Lane) *string { return &l.ToolsImage })},
		{"api-port", "apiPort", []string{"SRIOV_LANE_API_PORT", "HOST_PORT"}, "int", "host port of the Kubernetes API on 127.0.0.1", intSetter("apiPort", func(l *Lane) *int { return &l.APIPort })},
		{"registry", "registry.enabled", []string{"SRIOV_LANE_REGISTRY"}, "bool", "run a local registry for the dev loop", boolSetter("registry.enabled", func(l *Lane, b bool) { l.Registry.Enabled = &b })},
		{"registry-address", "registry.address", []string{"SRIOV_LANE_REGISTRY_ADDRESS"}, "string", "host address of the registry", strSetter(func(l *Lane) *string { return &l.Registry.Address })},
		{"pfs-include", "pfs.include", []string{"SRIOV_LANE_PFS_INCLUDE"}, "list", "PFs the lane may take (names, PCI addresses, globs)", listSetter(func(l *Lane) *[]string { return &l.PFs.Include })},
		{"pfs-exclude", "pfs.exclude", []string{"SRIOV_LANE_PFS_EXCLUDE", "PF_BLACKLIST"}, "list", "PFs the lane must not take", listSetter(func(l *Lane) *[]string { return &l.PFs.Exclude })},
		{"sysfs-root", "sysfsRoot", []string{"SRIOV_LANE_SYSFS_ROOT"}, "string", "where the host's sysfs is mounted", strSetter(func(l *Lane) *string { return &l.SysfsRoot })},
		{"vfio-dir", "vfioDir", []string{"SRIOV_LANE_VFIO_DIR"}, "string", "host VFIO device directory", strSetter(func(l *Lane) *string { return &l.VFIODir })},
		{"state-dir", "stateDir", []string{"SRIOV_LANE_STATE_DIR"}, "string", "journals and leases", strSetter(func(l *Lane) *string { return &l.StateDir })},
		{"volume", "volumes", []string{"SRIOV_LANE_VOLUMES"}, "list", "extra mount HOST:CONTAINER@NODEFILTER", listSetter(func(l *Lane) *[]string { return &l.Volumes })},
		{"image-registry-mirror", "imageRegistryMirror", []string{"SRIOV_LANE_IMAGE_REGISTRY_MIRROR"}, "string", "mirror for every image the lane pulls", strSetter(func(l *Lane) *string { return &l.ImageRegistryMirror })},
		{"topology-manager-policy", "kubelet.topologyManagerPolicy", []string{"SRIOV_LANE_TOPOLOGY_MANAGER_POLICY", "KUBEVIRT_TOPOLOGY_MANAGER_POLICY"}, "string", "agents' kubelet topology manager policy: none, best-effort, restricted, single-numa-node", strSetter(func(l *Lane) *string { return &l.Kubelet.TopologyManagerPolicy })},
		{"topology-manager-scope", "kubelet.topologyManagerScope", []string{"SRIOV_LANE_TOPOLOGY_MANAGER_SCOPE"}, "string", "agents' kubelet topology manager scope: container or pod", strSetter(func(l *Lane) *string { return &l.Kubelet.TopologyManagerScope })},
		{"datastore-on-tmpfs", "server.datastoreOnTmpfs", []string{"SRIOV_LANE_DATASTORE_ON_TMPFS", "KUBEVIRT_WITH_KIND_ETCD_IN_MEMORY"}, "bool", "keep the k3s server's datastore on a tmpfs", boolSetter("server.datastoreOnTmpfs", func(l *Lane, b bool) { l.Server.DatastoreOnTmpfs = &b })},
		{"network-resources-injector", "components.networkResourcesInjector", []string{"SRIOV_LANE_NETWORK_RESOURCES_INJECTOR"}, "bool", "deploy network-resources-injector: pods get VF requests from their NADs", boolSetter("components.networkResourcesInjector", func(l *Lane, b bool) { l.Components.NetworkResourcesInjector = b })},
		{"kubeconfig", "kubeconfig", []string{"SRIOV_LANE_KUBECONFIG"}, "string", "where to write the lane's kubeconfig", strSetter(func(l *Lane) *string { return &l.Kubeconfig })},
		{"wait-timeout", "waitTimeout", []string{"SRIOV_LANE_WAIT_TIMEOUT"}, "duration", "how long up waits for the cluster and VFs", func(l *Lane, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return invalid("waitTimeout", "e.g. 10m", "%q", v)
			}
			l.WaitTimeout.Duration = d
			return nil
		}},
	}
}

// fromEnv translates the value of an environment variable that speaks
// another tool's language into its setting's.
func fromEnv(name, v string) (string, error) {
	if name == "KUBEVIRT_USE_DRA" {
		return kubevirtUseDRA(v)
	}
	return v, nil
}

// kubevirtUseDRA reads kubevirtci's KUBEVIRT_USE_DRA: DRA is on for
// "true" and off otherwise, default false (kubevirt/kubevirtci
// cluster-up/cluster/kind-sriov/config_sriov_cluster.sh@39bd4947ba4d). A
// value kubevirtci would silently take as off ("yes", "1", "True") is
// refused here: whoever set it meant something.
func kubevirtUseDRA(v string) (string, error) {
	switch v {
	case "true":
		return VFAllocationDRA, nil
	case "false":
		return VFAllocationDevicePlugin, nil
	}
	return "", invalid("vfAllocation", "true or false, as kubevirtci reads it (only \"true\" turns DRA on)", "%q", v)
}

// Flags holds the lane settings registered on a command's flag set.
type Flags struct {
	values map[string]*flagValue
}

type flagValue struct {
	s   Setting
	val string
	set bool
}

func (f *flagValue) String() string { return f.val }
func (f *flagValue) Type() string   { return f.s.Type }
func (f *flagValue) Set(v string) error {
	if f.s.Type == "list" && f.set {
		v = f.val + "," + v
	}
	f.val, f.set = v, true
	return nil
}

// AddFlags registers every setting on fs. Config file and --name are
// registered by the commands themselves.
func AddFlags(fs *pflag.FlagSet, skip ...string) *Flags {
	fl := &Flags{values: map[string]*flagValue{}}
	for _, s := range Settings() {
		if slices.Contains(skip, s.Flag) {
			continue
		}
		v := &flagValue{s: s}
		fl.values[s.Flag] = v
		fs.Var(v, s.Flag, s.Usage+" (env "+strings.Join(s.Env, ", ")+")")
	}
	return fl
}

// AddFlagsOnly registers just the named settings on fs.
func AddFlagsOnly(fs *pflag.FlagSet, only ...string) *Flags {
	fl := &Flags{values: map[string]*flagValue{}}
	for _, s := range Settings() {
		if !slices.Contains(only, s.Flag) {
			continue
		}
		v := &flagValue{s: s}
		fl.values[s.Flag] = v
		fs.Var(v, s.Flag, s.Usage+" (env "+strings.Join(s.Env, ", ")+")")
	}
	return fl
}

// Source says where settings come from, for Load.
type Source struct {
	// File is the config file path ("" for none).
	File string
	// Getenv reads the environment (os.LookupEnv in the CLI).
	Getenv func(string) (string, bool)
	// Flags holds flag values set on the command line (may be nil).
	Flags *Flags
	// Name overrides the lane name (from --name), after everything else.
	Name string
}

// Load builds a lane config with precedence flag > env > file > default,
// then validates it. Every error is an *InvalidError (exit 2).
func Load(src Source) (*Lane, error) {
	l := &Lane{}
	if src.File != "" {
		b, err := os.ReadFile(src.File)
		if err != nil {
			return nil, &InvalidError{Field: "--config", Problem: err.Error(), Hint: "pass a readable lane config file"}
		}
		if err := DecodeStrict(b, l); err != nil {
			return nil, &InvalidError{Field: "config " + src.File, Problem: err.Error()}
		}
	}
	SetDefaults(l)
	var errs []error
	if src.Getenv != nil {
		for _, s := range Settings() {
			for i := len(s.Env) - 1; i >= 0; i-- { // later names are lower precedence: apply them first
				if v, ok := src.Getenv(s.Env[i]); ok && v != "" {
					v, err := fromEnv(s.Env[i], v)
					if err == nil {
						err = s.set(l, v)
					}
					if err != nil {
						errs = append(errs, fmt.Errorf("environment %s: %w", s.Env[i], err))
					}
				}
			}
		}
	}
	if src.Flags != nil {
		for _, s := range Settings() {
			if v := src.Flags.values[s.Flag]; v != nil && v.set {
				if err := s.set(l, v.val); err != nil {
					errs = append(errs, fmt.Errorf("--%s: %w", s.Flag, err))
				}
			}
		}
	}
	if src.Name != "" {
		l.Name = src.Name
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := Validate(l); err != nil {
		return nil, err
	}
	return l, nil
}

// DecodeStrict decodes YAML (or JSON) into l, rejecting unknown fields and
// naming them with their path, and a file of more than one document.
func DecodeStrict(b []byte, l *Lane) error { return decodeStrict(b, l, "a lane config") }

// decodeStrict decodes the one document of b, what's file, into v (a
// pointer to a struct), naming every unknown field by its path.
func decodeStrict(b []byte, v any, what string) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("file is empty")
	}
	b, err := oneDocument(b, what)
	if err != nil {
		return err
	}
	unknown, err := unknownFields(b, reflect.TypeOf(v).Elem())
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown field(s) %s", strings.Join(unknown, ", "))
	}
	return yaml.UnmarshalStrict(b, v)
}

// oneDocument returns the lane config's one document. The YAML library
// would read the first document and drop the rest without a word, so a
// second document with content is refused. Empty documents (a stray `---`
// at either end, or doubled) hold no settings and are skipped; documents are
// numbered as the file has them, empty ones included.
func oneDocument(b []byte, what string) ([]byte, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(b))
	found, firstExtra, extraLine := 0, 0, 0
	for n := 1; ; n++ {
		var doc yamlv3.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if emptyDocument(&doc) {
			continue
		}
		found++
		switch {
		case found == 1 && n > 1:
			// Empty documents came first: hand on this one alone, since
			// the decoder behind DecodeStrict would stop at the first.
			if b, err = yamlv3.Marshal(&doc); err != nil {
				return nil, fmt.Errorf("document %d: %w", n, err)
			}
		case found == 2:
			firstExtra, extraLine = n, doc.Content[0].Line
		}
	}
	if found > 1 {
		return nil, fmt.Errorf("document %d (line %d): %s holds one document; found %d", firstExtra, extraLine, what, found)
	}
	return b, nil
}

// emptyDocument reports whether doc holds nothing: YAML reads an empty
// document (or one of comments only) as a single null.
func emptyDocument(doc *yamlv3.Node) bool {
	if len(doc.Content) != 1 {
		return len(doc.Content) == 0
	}
	c := doc.Content[0]
	return c.Kind == yamlv3.ScalarNode && c.Tag == "!!null"
}

// Marshal renders l as YAML (defaulted, as `plan` prints it).
func Marshal(l *Lane) ([]byte, error) { return yaml.Marshal(l) }
