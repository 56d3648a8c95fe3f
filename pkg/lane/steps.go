package lane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/reset"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// Every step of up, in the order UpSteps runs them. Repair runs some of
// these values again (from prepareNodesStep to recordBaselineStep on a
// cluster that came back empty) and what two of them do (movePFs and
// configureVFs) for the one agent it repairs; reset runs up's wait,
// waitStep.
var (
	preflightStep        = Step{Name: "preflight", Run: stepPreflight}
	leaseStep            = Step{Name: "lease PFs", Run: stepLease}
	createClusterStep    = Step{Name: "create cluster", Run: stepCreateCluster}
	prepareNodesStep     = Step{Name: "prepare nodes", Run: stepPrepareNodes}
	movePFsStep          = Step{Name: "move PFs into agents", Run: stepMovePFs}
	vfsStep              = Step{Name: "create VFs and bind drivers", Run: stepVFs}
	labelNodesStep       = Step{Name: "label nodes", Run: stepLabelNodes}
	deployComponentsStep = Step{Name: "deploy components", Run: stepDeployComponents}
	waitStep             = Step{Name: "wait for VFs", Run: stepWait}
	outputsStep          = Step{Name: "write outputs", Run: stepOutputs}
	postUpHooksStep      = Step{Name: "post-up hooks", Run: stepPostUpHooks}
	recordBaselineStep   = Step{Name: "record baseline", Run: stepRecordBaseline}
)

// PreflightError is a failed preflight: nothing on the host was changed.
type PreflightError struct{ Failed []CheckResult }

func (e *PreflightError) Error() string {
	s := "preflight failed, nothing was changed:"
	for _, r := range e.Failed {
		s += fmt.Sprintf("\n  %s: %s", r.Name, r.Message)
		if r.Hint != "" {
			s += " (" + r.Hint + ")"
		}
	}
	return s + "\nrun 'sriov-lane check' for the full report"
}

func stepPreflight(ctx context.Context, c *Session) error {
	ck := &Checker{Lane: c.Lane, Engines: c.engines, PFs: PFReportFunc(c.Lane)}
	var failed []CheckResult
	for _, r := range ck.Run(ctx) {
		if r.Status == Fail {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		return &PreflightError{Failed: failed}
	}
	// The saved config names the engine found, so that down, status and
	// repair talk to it even where DOCKER_HOST is set otherwise, or unset.
	if c.Lane.ContainerEngine == "" {
		c.Lane.ContainerEngine = ck.Engine.Name
	}
	return nil
}

func stepLease(ctx context.Context, c *Session) error {
	l := c.Lane
	pfs, err := c.SRIOV.Discover()
	if err != nil {
		return err
	}
	// PFs with too few VFs are no candidates; say so if that is why we fall short.
	var cands []sriov.PF
	small := 0
	for _, pf := range pfs {
		if !l.EnoughVFs(pf.TotalVFs) {
			small++
			continue
		}
		cands = append(cands, pf)
	}
	leased, err := c.SRIOV.Lease(ctx, sriov.Request{
		Lane: l.Name, Count: l.PFsNeeded(), Candidates: cands, Selection: selection(l),
	})
	if err != nil {
		if small > 0 {
			return fmt.Errorf("%w; %d more PFs have sriov_totalvfs below vfsPerPF=%d", err, small, l.VFsPerPF)
		}
		return err
	}
	c.Leased = leased
	for _, pf := range leased {
		c.Log.V(1).Infof("leased %s (%s), totalvfs %d", pf.Name, pf.PCI, pf.TotalVFs)
	}
	return nil
}

func stepCreateCluster(ctx context.Context, c *Session) error {
	rec := provider.ClusterRecord{Name: c.Lane.ClusterName()}
	// Checked before the intent is journalled: an undo of this lane must
	// never delete a cluster of the same name that is not its own.
	if err := c.Provider.RefuseExisting(ctx, rec.Name, c.Lane.RegistryEnabled()); err != nil {
		return notOurs(err)
	}
	// Before any kubelet runs: they change these on the host.
	if err := recordHostSysctls(c); err != nil {
		return err
	}
	var entries []*journal.Entry
	ops := []string{provider.OpCluster}
	if c.Lane.RegistryEnabled() {
		ops = append(ops, provider.OpRegistry)
	}
	for _, op := range ops {
		e, err := c.Journal.Begin(op, rec)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	err := c.Provider.Create(ctx, c.Lane, provider.CreateOptions{Log: c.Log})
	if errors.Is(err, provider.ErrExists) {
		// Not ours: the undo must never delete someone else's cluster.
		for _, e := range entries {
			if merr := c.Journal.MarkUndone(e, "existed before this lane; left alone"); merr != nil {
				return errors.Join(err, merr)
			}
		}
		return notOurs(err)
	}
	// Done once the create has returned, failed or not: what it made
	// stands, and the journal's undo (the one owner of cleaning up after a
	// create, also with --retain) deletes it at once. Only an intent alone,
	// a create killed in flight, needs the undo's watch for what Docker was
	// still making.
	for _, e := range entries {
		if derr := c.Journal.Done(e); derr != nil {
			return errors.Join(err, derr)
		}
	}
	if err != nil {
		return err
	}
	c.Kubeconfig = c.Lane.KubeconfigPath()
	if err := writeOutsideFile(c, c.Kubeconfig, func(p string) error {
		return c.Provider.WriteKubeconfig(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	// Before any PF moves: a k3s image whose tag names no version is
	// only found out now.
	if c.Lane.VFAllocation == config.VFAllocationDRA {
		return cni.CheckDRAServed(c.Kube.Typed.Discovery())
	}
	return nil
}

// notOurs says what to do about a cluster or registry of the lane's name
// that the lane did not make.
func notOurs(err error) error {
	if errors.Is(err, provider.ErrExists) {
		return fmt.Errorf("%w: pick another --name, or remove it if it is a leftover", err)
	}
	return err
}

func stepPrepareNodes(ctx context.Context, c *Session) error {
	agents, err := c.Provider.Agents(ctx, c.Lane.ClusterName())
	if err != nil {
		return err
	}
	if len(agents) != c.Lane.Agents {
		return fmt.Errorf("cluster %s has %d agents, want %d", c.Lane.ClusterName(), len(agents), c.Lane.Agents)
	}
	c.Agents = agents
	return c.Provider.PrepareAll(ctx, c.Lane.ClusterName())
}

// stepMovePFs is where PFs leave the host: every agent up made gets its
// slice of the leased PFs.
func stepMovePFs(ctx context.Context, c *Session) error { return movePFs(ctx, c, c.Agents, c.Leased) }

// movePFs pins each agent's netns (pkg/sriov/pin.go), then moves its slice
// of pfs, pfsPerNode of them in order, into that pinned netns
// (pkg/sriov/move.go), which outlives the container.
func movePFs(ctx context.Context, c *Session, agents []provider.Node, pfs []sriov.PF) error {
	k := c.Lane.PFsPerNode
	for i, agent := range agents {
		container := sriov.ContainerTarget{ID: agent.ContainerID, Name: agent.Name, Docker: c.Docker}
		target, err := c.SRIOV.PinNetns(ctx, container, c.Lane.Dir().Pin(agent.Name))
		if err != nil {
			return err
		}
		for _, pf := range pfs[i*k : (i+1)*k] {
			name, err := c.SRIOV.MovePF(ctx, pf, target)
			if err != nil {
				return err // names the PF and the agent
			}
			c.Log.V(1).Infof("%s -> %s as %s", pf, agent.Name, name)
		}
	}
	return nil
}

// stepVFs creates and binds the VFs of the PFs placed in up's agents.
func stepVFs(ctx context.Context, c *Session) error { return configureVFs(ctx, c, c.Agents) }

// configureVFs creates and binds the VFs of the PFs the journal places in
// agents, each in its agent's pinned netns.
func configureVFs(ctx context.Context, c *Session, agents []provider.Node) error {
	ours := map[string]bool{}
	for _, a := range agents {
		ours[a.Name] = true
	}
	for _, p := range c.placements() {
		if !ours[p.Node] {
			continue
		}
		// VF netdevs (netdevice mode) join their PF in the pinned netns.
		vfs, err := c.SRIOV.ConfigureVFs(ctx, p.PF, sriov.VFOptions{
			Count: c.Lane.VFsPerPF, Mode: c.Lane.VFDriver, Target: sriov.PinnedTarget{Path: c.Lane.Dir().Pin(p.Node), Name: p.Node},
		})
		if err != nil {
			return err // names the PF
		}
		c.Log.V(1).Infof("%s: %d VFs (%s)", p.PF, len(vfs), c.Lane.VFDriver)
	}
	return nil
}

// Agents are workers, as kubevirtci's providers mark them. The role label is
// in the kubernetes.io namespace, which kubelet refuses to set on its own
// Node (k8s.io/kubelet pkg/apis/well_known_labels.go@v0.36.3 IsKubeletLabel,
// enforced by ValidateKubeletFlags in kubernetes/kubernetes
// cmd/kubelet/app/options/options.go@v1.36.3), so it cannot go through
// k3s's --node-label: only the API can set it, once the Node exists.
const (
	workerRoleLabel = "node-role.kubernetes.io/worker"
	workerRoleValue = "worker"
)

// stepLabelNodes gives every agent's Node the lane's node label (the
// device plugin and sriov-cni select on it) and the worker role.
func stepLabelNodes(ctx context.Context, c *Session) error {
	key, val := c.Lane.NodeLabelKV()
	labels := map[string]string{key: val, workerRoleLabel: workerRoleValue}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return fmt.Errorf("rendering node labels: %w", err)
	}
	for _, a := range c.Agents {
		if _, err := c.Kube.Typed.CoreV1().Nodes().Patch(ctx, a.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sriov-lane"}); err != nil {
			return fmt.Errorf("labelling node %s %s and %s=%s: %w", a.Name, c.Lane.NodeLabel, workerRoleLabel, workerRoleValue, err)
		}
	}
	return nil
}

// CNIOptions maps the lane config and PF placements to pkg/cni's options.
func CNIOptions(l *config.Lane, pfNamesInNodes []string) cni.Options {
	key, val := l.NodeLabelKV()
	return cni.Options{
		CNI: l.CNI, ResourcePrefix: l.ResourcePrefix, ResourceName: l.ResourceName,
		NodeSelectorKey: key, NodeSelectorValue: val, PFNames: pfNamesInNodes,
		VFDriver: l.VFDriver, VFAllocation: l.VFAllocation, ImageRegistryMirror: l.ImageRegistryMirror,
		// pkg/cni takes the pod CIDRs k3s gets from config.NetworksOf.
		IPFamily: l.IPFamily,
		Calico:   cni.CalicoOptions{ManifestDir: l.Calico.ManifestDir, CacheDir: statedir.Dir(l.StateDir).Cache()},
		// Without a certificate (plan); up adds one (cni.WithWebhookCerts).
		NetworkResourcesInjector: cni.InjectorOptions{Enabled: l.Components.NetworkResourcesInjector},
	}
}

// placements are where the lane's PFs are, as pkg/sriov reads the journal.
func (c *Session) placements() []sriov.Placement { return sriov.Placements(c.Journal.Entries()) }

func (c *Session) pfNamesInNodes() []string {
	seen := map[string]bool{}
	var names []string
	for _, p := range c.placements() {
		if !seen[p.NameInNode] {
			seen[p.NameInNode] = true
			names = append(names, p.NameInNode)
		}
	}
	sort.Strings(names)
	return names
}

func stepDeployComponents(ctx context.Context, c *Session) error {
	// Webhook certificates are made here, per up, and only sent to the API
	// server (plan shows placeholders).
	opts, err := cni.WithWebhookCerts(CNIOptions(c.Lane, c.pfNamesInNodes()))
	if err != nil {
		return err
	}
	objs, err := cni.Objects(ctx, opts)
	if err != nil {
		return err
	}
	c.objects = objs
	return cni.Apply(ctx, c.Kube, objs, c.Log)
}

// stepWait is up's wait for the objects its deploy step applied.
func stepWait(ctx context.Context, c *Session) error { return waitFor(ctx, c, c.objects) }

// waitFor waits, up to waitTimeout, for what makes the lane usable, objs
// being what up applied. All the while it reports at once each pod whose
// image the nodes cannot pull, and keeps waiting: kubelet retries, a
// registry may recover, and the user may load the image meanwhile; failing
// at the first ErrImagePull would undo a lane that a retry seconds later
// brings up. When the wait fails, its error ends with every pod that is
// not Ready and why.
func waitFor(ctx context.Context, c *Session, objs []*unstructured.Unstructured) error {
	wctx, cancel := context.WithTimeout(ctx, c.Lane.WaitTimeout.Duration)
	defer cancel()
	hint := pullHint(c.Lane)
	stop := cni.ReportPullFailures(wctx, c.Kube.Typed, c.Log, hint)
	err := waitLane(wctx, c, objs)
	stop()
	if err == nil || ctx.Err() != nil {
		// Interrupted: the undo comes first, not a cluster listing.
		return err
	}
	return cni.WithUnreadyPods(wctx, c.Kube.Typed, err, hint)
}

// pullHint says what to do when the nodes cannot pull an image.
func pullHint(l *config.Lane) string {
	load := "sriov-lane load --name " + l.Name
	if l.StateDir != config.DefaultStateDir {
		load += " --state-dir " + l.StateDir
	}
	load += " IMAGE..."
	if l.ImageRegistryMirror == "" {
		return fmt.Sprintf("the nodes pull from each image's own registry: set imageRegistryMirror (--image-registry-mirror) "+
			"to a registry they reach, pre-seeded with the images 'sriov-lane plan' lists, or import the images from this host's Docker with '%s'", load)
	}
	return fmt.Sprintf("the nodes pull every image through imageRegistryMirror %s: check that they reach it and that it holds "+
		"the images 'sriov-lane plan' lists, or import the images from this host's Docker with '%s'", l.ImageRegistryMirror, load)
}

// nodeNames are the names of the cluster's node containers, as Docker
// lists them now: the names their Nodes take.
func (c *Session) nodeNames(ctx context.Context) ([]string, error) {
	nodes, err := c.Provider.Nodes(ctx, c.Lane.ClusterName())
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names, nil
}

// waitLane is stepWait's wait proper, bounded by ctx.
func waitLane(ctx context.Context, c *Session, objs []*unstructured.Unstructured) error {
	names, err := c.nodeNames(ctx)
	if err != nil {
		return err
	}
	if err := cni.WaitNodesReady(ctx, c.Kube.Typed, names); err != nil {
		return err
	}
	// Rollouts first: a component pod that cannot start (image pull,
	// crash) is named by the rollout wait, while allocatable would only
	// time out. The device plugin's pods are what make allocatable appear.
	if err := cni.WaitDaemonSets(ctx, c.Kube.Typed, objs); err != nil {
		return err
	}
	// k3s's packaged components the lane keeps run on the pod network, so
	// only now can they be available; waiting for them here makes up's
	// baseline (and reset's wait) hold what k3s deployed, not half of it.
	if err := cni.WaitDeployments(ctx, c.Kube.Typed, k3sWorkloads()); err != nil {
		return err
	}
	// The injector's Deployment, then its webhook reached through the API
	// server: pods created after up get their VFs.
	if err := cni.WaitDeployments(ctx, c.Kube.Typed, objs); err != nil {
		return err
	}
	if err := cni.WaitInjectorServing(ctx, c.Kube.Typed, objs); err != nil {
		return err
	}
	if c.Lane.CNI == config.CNICalico {
		if err := cni.WaitCalico(ctx, c.Kube.Typed, c.Kube.Dynamic); err != nil {
			return err
		}
	}
	return waitVFs(ctx, c)
}

// waitVFs waits until every agent offers the VFs the journal says it
// holds: as allocatable of the lane's resource, or in dra mode as the
// devices of its ResourceSlices, counted per PF as the agent names it.
func waitVFs(ctx context.Context, c *Session) error {
	if c.Lane.VFAllocation == config.VFAllocationDRA {
		want := map[string]map[string]int{}
		for _, p := range c.placements() {
			if want[p.Node] == nil {
				want[p.Node] = map[string]int{}
			}
			want[p.Node][p.NameInNode] += p.VFs
		}
		return cni.WaitDRASlices(ctx, c.Kube.Typed, want)
	}
	want := map[string]int64{}
	for _, p := range c.placements() {
		want[p.Node] += int64(p.VFs)
	}
	return cni.WaitAllocatable(ctx, c.Kube.Typed, want, c.Lane.Resource())
}

// k3sWorkloads are the Deployments k3s deploys in kube-system for the
// packaged components a lane keeps, as objects the rollout waits read.
func k3sWorkloads() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, c := range provider.K3sKept {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("Deployment")
		u.SetNamespace(metav1.NamespaceSystem)
		u.SetName(c.Deployment)
		out = append(out, u)
	}
	return out
}

// stepOutputs writes what kubevirtci's cluster-up expects when asked:
// .kubeconfig, .kubectl and config-provider-<provider>.sh.
func stepOutputs(ctx context.Context, c *Session) error {
	if c.KubevirtciDir == "" {
		return nil
	}
	dir, err := filepath.Abs(c.KubevirtciDir)
	if err != nil {
		return err
	}
	name, err := kubevirtciProviderName(dir)
	if err != nil {
		return err
	}
	kc, kubectl := filepath.Join(dir, ".kubeconfig"), filepath.Join(dir, ".kubectl")
	provider := filepath.Join(dir, "config-provider-"+name+".sh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeOutsideFile(c, kc, func(p string) error {
		return c.Provider.WriteKubeconfig(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	// k3s's multi-call binary is kubectl only when run under that very name;
	// kubevirtci runs it as .kubectl. The binary goes into the lane dir
	// (removed with the lane) and .kubectl is a wrapper that runs it.
	bin := c.Lane.Dir().Kubectl()
	if err := writeOutsideFile(c, bin, func(p string) error {
		return c.Provider.CopyKubectl(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	if err := writeOutsideFile(c, kubectl, func(p string) error {
		return writeExecutable(p, kubectlWrapper(bin, c.Lane.Dir().KubectlData()))
	}); err != nil {
		return err
	}
	return writeOutsideFile(c, provider, func(p string) error {
		if err := os.WriteFile(p, []byte(kubevirtciProviderConfig(c.Lane, kc, kubectl)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		return nil
	})
}

func stepPostUpHooks(ctx context.Context, c *Session) error {
	return runHooks(ctx, c, "post-up", c.Lane.Hooks.PostUp, c.Kubeconfig)
}

// stepRecordBaseline is up's last step: what the cluster holds now, after
// the components and the post-up hooks, is what reset returns the lane to.
func stepRecordBaseline(ctx context.Context, c *Session) error {
	b, err := reset.Record(ctx, c.Kube, time.Now())
	if err != nil {
		return fmt.Errorf("recording what the cluster holds for reset: %w", err)
	}
	c.Log.V(1).Infof("%d namespaces, %d cluster-scoped objects", len(b.Namespaces), len(b.Objects))
	if len(b.Unlisted) > 0 {
		c.Log.V(1).Infof("not read (reset leaves them alone): %s", strings.Join(b.Unlisted, ", "))
	}
	return reset.Save(c.Lane.Dir(), b)
}
