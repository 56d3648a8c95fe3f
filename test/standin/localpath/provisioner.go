package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	pvController "sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
	"sigs.k8s.io/yaml"
)

// Names and defaults of provisioner.go@v0.0.36.
const (
	nodeAffinityKey         = "kubernetes.io/hostname"
	defaultPathForAnyNode   = "DEFAULT_PATH_FOR_NON_LISTED_NODES"
	helperScriptDir         = "/script"
	helperDataVolume        = "data"
	helperScriptVolume      = "script"
	defaultCmdTimeout       = 120
	defaultVolumeType       = "hostPath"
	selectedNodeAnnotation  = "local.path.provisioner/selected-node"
	helperPodNameMaxLength  = 128
	configFileCheckInterval = 30 * time.Second
)

// configData is the config file's JSON.
type configData struct {
	CmdTimeoutSeconds int    `json:"cmdTimeoutSeconds,omitempty"`
	SetupCommand      string `json:"setupCommand,omitempty"`
	TeardownCommand   string `json:"teardownCommand,omitempty"`
	classConfigData
	StorageClassConfigs map[string]classConfigData `json:"storageClassConfigs"`
}

// NodePathMap holds pointers as upstream's does, so that a null entry
// fails as it does there (rancher/local-path-provisioner
// provisioner.go@v0.0.36 StorageClassConfigData).
type classConfigData struct {
	NodePathMap          []*nodePathMapData `json:"nodePathMap,omitempty"`
	SharedFileSystemPath string             `json:"sharedFileSystemPath,omitempty"`
}

type nodePathMapData struct {
	Node  string   `json:"node,omitempty"`
	Paths []string `json:"paths,omitempty"`
}

// config is configData checked: paths by node, per class when the file
// names classes.
type config struct {
	cmdTimeoutSeconds int
	setupCommand      string
	teardownCommand   string
	classConfig
	classes map[string]classConfig
}

type classConfig struct {
	nodePaths map[string]map[string]bool
	sharedFS  string
}

// readConfig reads a .json file, or takes the value itself as JSON. A
// file is decoded as a stream (rancher/local-path-provisioner
// provisioner.go@v0.0.36 loadConfigFile): what follows its first JSON
// value is not read, and an empty file is io.EOF; a value is unmarshalled
// whole (unmarshalFromString).
func readConfig(file string) (*configData, error) {
	var d configData
	var err error
	if strings.HasSuffix(file, ".json") {
		var f *os.File
		if f, err = os.Open(file); err == nil {
			err = json.NewDecoder(f).Decode(&d)
			_ = f.Close()
		}
	} else {
		err = json.Unmarshal([]byte(file), &d)
	}
	if err != nil {
		return nil, fmt.Errorf("fail to load config file %v: %w", file, err)
	}
	return &d, nil
}

func canonicalize(d *configData) (*config, error) {
	c := &config{setupCommand: d.SetupCommand, teardownCommand: d.TeardownCommand, cmdTimeoutSeconds: d.CmdTimeoutSeconds}
	if c.cmdTimeoutSeconds <= 0 {
		c.cmdTimeoutSeconds = defaultCmdTimeout
	}
	if len(d.StorageClassConfigs) == 0 {
		cc, err := canonicalizeClass(d.classConfigData)
		if err != nil {
			return nil, err
		}
		c.classConfig = *cc
		return c, nil
	}
	c.classes = map[string]classConfig{}
	for name, cd := range d.StorageClassConfigs {
		cc, err := canonicalizeClass(cd)
		if err != nil {
			return nil, fmt.Errorf("config for class %s is invalid: %w", name, err)
		}
		c.classes[name] = *cc
	}
	return c, nil
}

func canonicalizeClass(d classConfigData) (*classConfig, error) {
	c := &classConfig{sharedFS: d.SharedFileSystemPath, nodePaths: map[string]map[string]bool{}}
	// A null entry (n nil) and an empty path (p[0]) panic, as in
	// rancher/local-path-provisioner provisioner.go@v0.0.36
	// canonicalizeStorageClassConfig: at start the provisioner dies, and
	// so it does when the file changes under it.
	for _, n := range d.NodePathMap {
		if c.nodePaths[n.Node] != nil {
			return nil, fmt.Errorf("StorageClass config canonicalization failed: duplicate node %v", n.Node)
		}
		paths := map[string]bool{}
		c.nodePaths[n.Node] = paths
		for _, p := range n.Paths {
			if p[0] != '/' {
				return nil, fmt.Errorf("StorageClass config canonicalization failed: path must start with / for path %v on node %v", p, n.Node)
			}
			abs := filepath.Clean(p)
			if abs == "/" {
				return nil, fmt.Errorf("StorageClass config canonicalization failed: cannot use root ('/') as path on node %v", n.Node)
			}
			if paths[abs] {
				return nil, fmt.Errorf("StorageClass config canonicalization failed: duplicate path %v on node %v", p, n.Node)
			}
			paths[abs] = true
		}
	}
	return c, nil
}

// sharedFS reports whether the class's volumes live on one file system
// every node mounts; a class must name node paths or that, not both.
func (c *classConfig) shared() (bool, error) {
	switch {
	case c.sharedFS != "" && len(c.nodePaths) != 0:
		return false, fmt.Errorf("both nodePathMap and sharedFileSystemPath are defined. Please make sure only one is in use")
	case len(c.nodePaths) != 0:
		return false, nil
	case c.sharedFS != "":
		return true, nil
	}
	return false, fmt.Errorf("both nodePathMap and sharedFileSystemPath are unconfigured")
}

type provisioner struct {
	ctx               context.Context
	cs                kubernetes.Interface
	namespace         string
	serviceAccount    string
	configMapName     string
	configFile        string
	allowUnsafeHelper bool

	mu        sync.RWMutex
	data      *configData
	config    *config
	helperPod *corev1.Pod
}

func newProvisioner(ctx context.Context, cs kubernetes.Interface, configFile, namespace, serviceAccount, configMapName, helperPodYAML string, allowUnsafe bool) (*provisioner, error) {
	p := &provisioner{ctx: ctx, cs: cs, namespace: namespace, serviceAccount: serviceAccount, configMapName: configMapName,
		configFile: configFile, allowUnsafeHelper: allowUnsafe}
	var err error
	if p.helperPod, err = parseHelperPod(helperPodYAML, allowUnsafe); err != nil {
		return nil, err
	}
	if err := p.refreshConfig(); err != nil {
		return nil, err
	}
	go p.watchConfig()
	return p, nil
}

// refreshConfig takes a changed config file only when it is valid.
func (p *provisioner) refreshConfig() error {
	d, err := readConfig(p.configFile)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if reflect.DeepEqual(d, p.data) {
		return nil
	}
	c, err := canonicalize(d)
	if err != nil {
		return err
	}
	p.data, p.config = d, c
	return nil
}

// watchConfig reads the config file again every 30 s, and the helper pod
// template from $CONFIG_MOUNT_PATH when that is set.
func (p *provisioner) watchConfig() {
	t := time.NewTicker(configFileCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			if err := p.refreshConfig(); err != nil {
				logrus.Errorf("failed to load the new config file: %v", err)
			}
			if err := p.refreshHelperPod(); err != nil {
				logrus.Errorf("failed to load the new helper pod manifest: %v", err)
			}
		}
	}
}

// refreshHelperPod reads the template again from $CONFIG_MOUNT_PATH when
// that is set. A file it cannot read keeps the old template; one that is
// refused leaves none, as rancher/local-path-provisioner
// provisioner.go@v0.0.36 refreshHelperPod assigns loadHelperPodFile's nil:
// the next volume's helper pod then panics.
func (p *provisioner) refreshHelperPod() error {
	dir, ok := os.LookupEnv(envConfigMountPath)
	if !ok {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, defaultHelperPodFileKey))
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.helperPod, err = parseHelperPod(string(b), p.allowUnsafeHelper)
	return err
}

// parseHelperPod reads the helper pod template and, unless unsafe ones are
// allowed, refuses what util.go@v0.0.36 validateHelperPodTemplate refuses.
func parseHelperPod(y string, allowUnsafe bool) (*corev1.Pod, error) {
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		return nil, fmt.Errorf("invalid YAMLToJSON the helper pod with helperPodYaml: %v", y)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(js, &pod); err != nil {
		return nil, fmt.Errorf("invalid unmarshal the helper pod with helperPodJson: %v", string(js))
	}
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("helper pod template does not specify any container")
	}
	if allowUnsafe {
		return &pod, nil
	}
	if len(pod.Spec.Containers) != 1 {
		return nil, fmt.Errorf("helper pod template must specify exactly one container")
	}
	c := pod.Spec.Containers[0]
	forbidden := []struct {
		bad  bool
		what string
	}{
		{len(pod.Spec.InitContainers) > 0, "define initContainers"},
		{len(pod.Spec.EphemeralContainers) > 0, "define ephemeralContainers"},
		{len(pod.Spec.Volumes) > 0, "define custom volumes"},
		{pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC, "enable host namespaces"},
		{pod.Spec.NodeName != "", "set spec.nodeName"},
		{pod.Spec.ServiceAccountName != "", "set spec.serviceAccountName"},
		{len(c.VolumeMounts) > 0, "define custom volumeMounts"},
		{len(c.EnvFrom) > 0, "define envFrom"},
		{c.Lifecycle != nil, "define container lifecycle hooks"},
		{c.LivenessProbe != nil, "define container livenessProbe"},
		{c.ReadinessProbe != nil, "define container readinessProbe"},
		{c.StartupProbe != nil, "define container startupProbe"},
	}
	for _, e := range c.Env {
		forbidden = append(forbidden, struct {
			bad  bool
			what string
		}{e.ValueFrom != nil, fmt.Sprintf("define env.valueFrom (env %q)", e.Name)})
	}
	if s := pod.Spec.SecurityContext; s != nil {
		forbidden = append(forbidden, []struct {
			bad  bool
			what string
		}{
			{s.RunAsUser != nil && *s.RunAsUser == 0, "set pod runAsUser to 0 (root)"},
			{s.RunAsGroup != nil && *s.RunAsGroup == 0, "set pod runAsGroup to 0 (root)"},
			{len(s.Sysctls) > 0, "define sysctls"},
		}...)
	}
	if s := c.SecurityContext; s != nil {
		forbidden = append(forbidden, []struct {
			bad  bool
			what string
		}{
			{s.Privileged != nil && *s.Privileged, "set privileged: true"},
			{s.Capabilities != nil && len(s.Capabilities.Add) > 0, "add capabilities"},
			{s.AllowPrivilegeEscalation != nil && *s.AllowPrivilegeEscalation, "set allowPrivilegeEscalation: true"},
		}...)
	}
	for _, f := range forbidden {
		if f.bad {
			return nil, fmt.Errorf("helper pod template must not %s unless %s is enabled", f.what, flagAllowUnsafeHelperPod)
		}
	}
	return &pod, nil
}

func (p *provisioner) classConfig(class string) (*classConfig, *config, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.config == nil {
		return nil, nil, fmt.Errorf("no valid config available")
	}
	if len(p.config.classes) == 0 {
		return &p.config.classConfig, p.config, nil
	}
	c, ok := p.config.classes[class]
	if !ok {
		return nil, nil, fmt.Errorf("BUG: Got request for unexpected storage class %s", class)
	}
	return &c, p.config, nil
}

// pathOnNode is the node's base path: the class's nodePath parameter when
// it is one of the node's, else one of them at random.
func pathOnNode(c *classConfig, node, requested string) (string, error) {
	shared, err := c.shared()
	if err != nil {
		return "", err
	}
	if shared {
		return c.sharedFS, nil
	}
	paths := c.nodePaths[node]
	if paths == nil {
		if paths = c.nodePaths[defaultPathForAnyNode]; paths == nil {
			return "", fmt.Errorf("config doesn't contain node %v, and no %v available", node, defaultPathForAnyNode)
		}
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no local path available on node %v", node)
	}
	if requested != "" {
		if !paths[requested] {
			return "", fmt.Errorf("config doesn't contain path %v on node %v", requested, node)
		}
		return requested, nil
	}
	i := rand.IntN(len(paths))
	for path := range paths {
		if i == 0 {
			return path, nil
		}
		i--
	}
	return "", fmt.Errorf("failed to select a random path: no path selected from %d candidates", len(paths))
}

// folderFromPattern renders the class's pathPattern for the claim; unless
// unsafe ones are allowed it must lie under <namespace>/<claim>/.
func folderFromPattern(pattern string, opts pvController.ProvisionOptions, allowUnsafe bool) (string, error) {
	tpl, err := template.New("pathPattern").Parse(pattern)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, struct {
		PVName string
		PVC    metav1.ObjectMeta
	}{opts.PVName, opts.PVC.ObjectMeta}); err != nil {
		return "", err
	}
	path := buf.String()
	if allowUnsafe {
		return path, nil
	}
	if prefix := filepath.Join(opts.PVC.Namespace, opts.PVC.Name) + string(filepath.Separator); !strings.HasPrefix(path, prefix) {
		return "", fmt.Errorf("pathPattern must start with {{ .PVC.Namespace }}/{{ .PVC.Name }}/: %s", path)
	}
	return path, nil
}

// Provision makes the claim's directory on its node with a helper pod and
// returns its PV (provisioner.go@v0.0.36 provisionFor).
func (p *provisioner) Provision(_ context.Context, opts pvController.ProvisionOptions) (*corev1.PersistentVolume, pvController.ProvisioningState, error) {
	done := pvController.ProvisioningFinished
	c, cfg, err := p.classConfig(opts.StorageClass.Name)
	if err != nil {
		return nil, done, err
	}
	pvc, node, class := opts.PVC, opts.SelectedNode, opts.StorageClass
	shared, err := c.shared()
	if err != nil {
		return nil, done, err
	}
	if !shared {
		if pvc.Spec.Selector != nil {
			return nil, done, fmt.Errorf("claim.Spec.Selector is not supported")
		}
		for _, m := range pvc.Spec.AccessModes {
			if m != corev1.ReadWriteOnce && m != corev1.ReadWriteOncePod {
				return nil, done, fmt.Errorf("NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes")
			}
		}
		if node == nil {
			return nil, done, fmt.Errorf("configuration error, no node was specified")
		}
	}
	nodeName := ""
	if node != nil {
		nodeName = node.Name
	}
	base, err := pathOnNode(c, nodeName, class.Parameters["nodePath"])
	if err != nil {
		return nil, done, err
	}
	folder := strings.Join([]string{opts.PVName, pvc.Namespace, pvc.Name}, "_")
	if pattern, ok := class.Parameters["pathPattern"]; ok {
		unsafe := false
		raw, ok := class.Parameters["allowUnsafePathPattern"]
		if !ok {
			raw, ok = class.Annotations["allowUnsafePathPattern"]
		}
		if ok {
			if unsafe, err = strconv.ParseBool(raw); err != nil {
				logrus.Warnf("failed to parse allowUnsafePathPattern %v, defaulting to false: %v", raw, err)
				unsafe = false
			}
		}
		if folder, err = folderFromPattern(pattern, opts, unsafe); err != nil {
			return nil, done, fmt.Errorf("failed to create path from pattern %v: %w", pattern, err)
		}
		if !unsafe && !filepath.IsLocal(folder) {
			return nil, done, fmt.Errorf("folder path contains invalid references: %s", folder)
		}
	}
	path := filepath.Join(base, folder)
	logrus.Infof("Creating volume %v at %v:%v", opts.PVName, nodeName, path)
	cmd := []string{"/bin/sh", helperScriptDir + "/setup"}
	if cfg.setupCommand != "" {
		cmd = []string{cfg.setupCommand}
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	// A claim without volumeMode (the API server defaults it) panics, as
	// *pvc.Spec.VolumeMode does in rancher/local-path-provisioner
	// provisioner.go@v0.0.36 provisionFor.
	mode := *pvc.Spec.VolumeMode
	if err := p.runHelper("create", cmd, volume{name: opts.PVName, path: path, mode: mode, size: size.Value(), node: nodeName}, c, cfg); err != nil {
		return nil, done, err
	}
	volumeType := defaultVolumeType
	if v, ok := class.Annotations["defaultVolumeType"]; ok {
		volumeType = v
	}
	if v, ok := pvc.Annotations["volumeType"]; ok {
		volumeType = v
	}
	src, err := volumeSource(volumeType, path)
	if err != nil {
		return nil, done, err
	}
	var affinity *corev1.VolumeNodeAffinity
	if !shared {
		key := nodeAffinityKey
		if k := class.Parameters["nodeAffinityKey"]; k != "" {
			key = k
		}
		value, ok := node.Labels[key]
		if !ok {
			value = nodeName
		}
		affinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}},
		}}}}
	}
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName, Annotations: map[string]string{selectedNodeAnnotation: nodeName}},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: *class.ReclaimPolicy,
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    &fs,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource:        src,
			NodeAffinity:                  affinity,
		},
	}, done, nil
}

func volumeSource(volumeType, path string) (corev1.PersistentVolumeSource, error) {
	switch strings.ToLower(volumeType) {
	case "local":
		return corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}}, nil
	case "hostpath":
		t := corev1.HostPathDirectoryOrCreate
		return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}, nil
	}
	// "%s" in quotes, not %q: rancher/local-path-provisioner
	// provisioner.go@v0.0.36 createPersistentVolumeSource does not escape
	// the name.
	return corev1.PersistentVolumeSource{}, fmt.Errorf("failed to create persistent volume source: \"%s\" is not a recognised volume type", volumeType)
}

// Delete removes the volume's directory with a helper pod, unless the PV
// is retained or its node is gone (provisioner.go@v0.0.36 deleteFor).
func (p *provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	c, cfg, err := p.classConfig(pv.Spec.StorageClassName)
	if err != nil {
		return err
	}
	path, node, err := pvPathAndNode(pv, c)
	if err != nil {
		// Said twice, as upstream wraps in getPathAndNodeForPV and again
		// in deleteFor (rancher/local-path-provisioner
		// provisioner.go@v0.0.36).
		return fmt.Errorf("failed to delete volume %v: failed to delete volume %v: %w", pv.Name, pv.Name, err)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain {
		logrus.Infof("Retained volume %v", pv.Name)
		return nil
	}
	if node != "" {
		if _, err := p.cs.CoreV1().Nodes().Get(p.ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			logrus.Infof("Node %v does not exist, skipping cleanup of volume %v", node, pv.Name)
			return nil
		}
	}
	logrus.Infof("Deleting volume %v at %v:%v", pv.Name, node, path)
	cmd := []string{"/bin/sh", helperScriptDir + "/teardown"}
	if cfg.teardownCommand != "" {
		cmd = []string{cfg.teardownCommand}
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	// A PV without volumeMode panics, as *pv.Spec.VolumeMode does in
	// rancher/local-path-provisioner provisioner.go@v0.0.36 deleteFor.
	mode := *pv.Spec.VolumeMode
	if err := p.runHelper("delete", cmd, volume{name: pv.Name, path: path, mode: mode, size: size.Value(), node: node}, c, cfg); err != nil {
		return fmt.Errorf("failed to delete volume %v: %w", pv.Name, err)
	}
	return nil
}

// pvPathAndNode reads the directory and, off a shared file system, the
// one node of a PV this provisioner made.
func pvPathAndNode(pv *corev1.PersistentVolume, c *classConfig) (string, string, error) {
	src := pv.Spec.PersistentVolumeSource
	var path string
	switch {
	case src.HostPath != nil && src.Local == nil:
		path = src.HostPath.Path
	case src.Local != nil && src.HostPath == nil:
		path = src.Local.Path
	default:
		return "", "", fmt.Errorf("no path set")
	}
	shared, err := c.shared()
	if err != nil {
		return "", "", err
	}
	if shared {
		return path, "", nil
	}
	if pv.Spec.NodeAffinity == nil {
		return "", "", fmt.Errorf("no NodeAffinity set")
	}
	if pv.Spec.NodeAffinity.Required == nil {
		return "", "", fmt.Errorf("no NodeAffinity.Required set")
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Operator == corev1.NodeSelectorOpIn {
				if len(e.Values) != 1 {
					return "", "", fmt.Errorf("multiple values for the node affinity")
				}
				return path, e.Values[0], nil
			}
		}
	}
	return "", "", fmt.Errorf("cannot find affinited node")
}

type volume struct {
	name, path, node string
	mode             corev1.PersistentVolumeMode
	size             int64
}

// helperPod is the pod that runs cmd for action on the volume's node:
// the template with the volume's parent directory and the scripts
// mounted, the VOL_* variables and arguments, run once.
func (p *provisioner) helperPodFor(action string, cmd []string, v volume, c *classConfig, cfg *config) (*corev1.Pod, error) {
	shared, err := c.shared()
	if err != nil {
		return nil, err
	}
	if v.name == "" || v.path == "" || (!shared && v.node == "") {
		return nil, fmt.Errorf("invalid empty name or path or node")
	}
	if !filepath.IsAbs(v.path) {
		return nil, fmt.Errorf("volume path %s is not absolute", v.path)
	}
	v.path = filepath.Clean(v.path)
	parent, dir := filepath.Split(v.path)
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	volumes := []corev1.Volume{{Name: helperDataVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: parent, Type: &dirOrCreate}}}}
	p.mu.RLock()
	pod := p.helperPod.DeepCopy()
	p.mu.RUnlock()
	var scripts []corev1.KeyToPath
	if cfg.setupCommand == "" {
		scripts = append(scripts, corev1.KeyToPath{Key: "setup", Path: "setup"})
	}
	if cfg.teardownCommand == "" {
		scripts = append(scripts, corev1.KeyToPath{Key: "teardown", Path: "teardown"})
	}
	ctr := &pod.Spec.Containers[0]
	if len(scripts) > 0 {
		volumes = append(volumes, corev1.Volume{Name: helperScriptVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: p.configMapName}, Items: scripts,
		}}})
		mount(&ctr.VolumeMounts, helperScriptVolume, helperScriptDir).MountPath = helperScriptDir
	}
	parent = strings.TrimSuffix(mount(&ctr.VolumeMounts, helperDataVolume, parent).MountPath, "/")
	dir = strings.TrimSuffix(dir, "/")
	if parent == "" || dir == "" || !filepath.IsAbs(parent) {
		return nil, fmt.Errorf("invalid path %v for %v: cannot find parent dir or volume dir or parent dir is relative", action, v.path)
	}
	volDir := filepath.Join(parent, dir)
	pod.Name = pod.Name + "-" + action + "-" + v.name
	if len(pod.Name) > helperPodNameMaxLength {
		pod.Name = pod.Name[:helperPodNameMaxLength]
	}
	pod.Namespace = p.namespace
	if pod.Spec.NodeName == "" && v.node != "" {
		pod.Spec.NodeName = v.node
	}
	pod.Spec.ServiceAccountName = p.serviceAccount
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if pod.Spec.Tolerations == nil {
		pod.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, volumes...)
	ctr.Command = cmd
	ctr.Env = append(ctr.Env,
		corev1.EnvVar{Name: "VOL_DIR", Value: volDir},
		corev1.EnvVar{Name: "VOL_MODE", Value: string(v.mode)},
		corev1.EnvVar{Name: "VOL_SIZE_BYTES", Value: strconv.FormatInt(v.size, 10)},
	)
	ctr.Args = []string{"-p", volDir, "-s", strconv.FormatInt(v.size, 10), "-m", string(v.mode), "-a", action}
	return pod, nil
}

// mount returns the container's mount named name, adding one at path
// (or giving a template's mount without a path that one).
func mount(mounts *[]corev1.VolumeMount, name, path string) *corev1.VolumeMount {
	for i := range *mounts {
		if (*mounts)[i].Name == name {
			if (*mounts)[i].MountPath == "" {
				(*mounts)[i].MountPath = path
			}
			return &(*mounts)[i]
		}
	}
	*mounts = append(*mounts, corev1.VolumeMount{Name: name, MountPath: path})
	return &(*mounts)[len(*mounts)-1]
}

// runHelper runs the helper pod, waits up to cmdTimeoutSeconds for it to
// succeed, logs its output and deletes it.
func (p *provisioner) runHelper(action string, cmd []string, v volume, c *classConfig, cfg *config) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("failed to %v volume %v: %w", action, v.name, err)
		}
	}()
	pod, err := p.helperPodFor(action, cmd, v, c, cfg)
	if err != nil {
		return err
	}
	pods := p.cs.CoreV1().Pods(p.namespace)
	logrus.Infof("create the helper pod %s into %s", pod.Name, p.namespace)
	if _, err := pods.Create(p.ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	defer func() {
		p.logHelper(pod.Name)
		if e := pods.Delete(p.ctx, pod.Name, metav1.DeleteOptions{}); e != nil {
			logrus.Errorf("unable to delete the helper pod: %v", e)
		}
	}()
	for i := 0; i < cfg.cmdTimeoutSeconds; i++ {
		got, err := pods.Get(p.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase == corev1.PodSucceeded {
			logrus.Infof("Volume %v has been %vd on %v:%v", v.name, action, v.node, v.path)
			return nil
		}
		time.Sleep(time.Second)
	}
	return errors.New("create process timeout after " + strconv.Itoa(cfg.cmdTimeoutSeconds) + " seconds")
}

func (p *provisioner) logHelper(name string) {
	rc, err := p.cs.CoreV1().Pods(p.namespace).GetLogs(name, &corev1.PodLogOptions{Container: "helper-pod"}).Stream(p.ctx)
	if err != nil {
		logrus.Errorf("failed to save %s logs: error in opening stream: %v", name, err)
		return
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	logrus.Infof("Start of %s logs", name)
	if s := strings.Trim(string(b), "\n"); s != "" {
		for _, l := range strings.Split(s, "\n") {
			logrus.Info(l)
		}
	}
	logrus.Infof("End of %s logs", name)
}
