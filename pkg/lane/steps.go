package lane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/kube"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

func stepLease(ctx context.Context, c *Session) error {
	l := c.Lane
	pfs, err := sriov.Discover(c.SRIOV.Sysfs)
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
	leased, err := sriov.NewLeaser(l.StateDir).Allocate(ctx, c.SRIOV, sriov.Request{
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
		c.Progress.Detailf("leased %s (%s), totalvfs %d", pf.Name, pf.PCI, pf.TotalVFs)
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
	err := c.Provider.Create(ctx, c.Lane, createOptions(c))
	if errors.Is(err, provider.ErrExists) {
		// Not ours: the undo must never delete someone else's cluster.
		for _, e := range entries {
			if merr := c.Journal.MarkUndone(e, "existed before this lane; left alone"); merr != nil {
				return errors.Join(err, merr)
			}
		}
		return notOurs(err)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := c.Journal.Done(e); err != nil {
			return err
		}
	}
	c.Kubeconfig = c.Lane.KubeconfigPath()
	if err := writeOutsideFile(c, c.Kubeconfig, func(p string) error {
		return c.Provider.WriteKubeconfig(ctx, c.Lane.ClusterName(), p)
	}); err != nil {
		return err
	}
	return c.connect()
}

// connect makes the run's clients of the lane's cluster from its
// kubeconfig: up's steps once the cluster exists, and commands acting on a
// running lane (reset).
func (c *Session) connect() error {
	if c.Kubeconfig == "" {
		c.Kubeconfig = c.Lane.KubeconfigPath()
	}
	var err error
	c.Kube, err = kube.Connect(c.Kubeconfig)
	return err
}

// notOurs says what to do about a cluster or registry of the lane's name
// that the lane did not make.
func notOurs(err error) error {
	if errors.Is(err, provider.ErrExists) {
		return fmt.Errorf("%w: pick another --name, or remove it if it is a leftover", err)
	}
	return err
}

// createOptions are the provider's options for the lane's cluster. --retain
// must reach the provider as well: it removes what a failed k3d create made
// unless told to keep it, before the step's own rollback is even asked.
func createOptions(c *Session) provider.CreateOptions {
	return provider.CreateOptions{
		Progress: func(node, msg string) { c.Progress.Detailf("%s: %s", node, msg) },
		Note:     func(msg string) { c.Progress.Infof("%s", msg) },
		Retain:   c.Retain,
	}
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

// stepBindPFs is where PFs leave the host: each agent's netns is pinned
// (pkg/sriov/pin.go), then gets its slice of the leased PFs, moved into
// that pinned netns (pkg/sriov/move.go), which outlives the container.
func stepBindPFs(ctx context.Context, c *Session) error {
	k := c.Lane.PFsPerNode
	c.Pins = map[string]sriov.PinnedTarget{}
	for i, agent := range c.Agents {
		container := sriov.ContainerTarget{ID: agent.ContainerID, Name: agent.Name, Docker: c.Docker}
		target, err := c.SRIOV.PinNetns(ctx, container, c.Lane.Dir().Pin(agent.Name))
		if err != nil {
			return err
		}
		c.Pins[agent.Name] = target
		for _, pf := range c.Leased[i*k : (i+1)*k] {
			name, err := c.SRIOV.MovePF(ctx, pf, target)
			if err != nil {
				return err // names the PF and the agent
			}
			c.Progress.Detailf("%s -> %s as %s", pf, agent.Name, name)
		}
	}
	return nil
}

// stepVFs creates and binds the VFs of the PFs placed in this run's agents
// (all of them in up, the one being repaired in repair).
func stepVFs(ctx context.Context, c *Session) error {
	for _, p := range c.placements() {
		if _, ours := c.Pins[p.Node]; !ours {
			continue
		}
		// VF netdevs (netdevice mode) join their PF in the pinned netns.
		vfs, err := c.SRIOV.ConfigureVFs(ctx, p.PF, sriov.VFOptions{
			Count: c.Lane.VFsPerPF, Mode: c.Lane.VFDriver, Target: c.Pins[p.Node],
		})
		if err != nil {
			return err // names the PF
		}
		c.Progress.Detailf("%s: %d VFs (%s)", p.PF, len(vfs), c.Lane.VFDriver)
	}
	return nil
}

func stepLabelNodes(ctx context.Context, c *Session) error {
	key, val := c.Lane.NodeLabelKV()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: val}}})
	for _, a := range c.Agents {
		if _, err := c.Kube.Typed.CoreV1().Nodes().Patch(ctx, a.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "sriov-lane"}); err != nil {
			return fmt.Errorf("labelling node %s %s: %w", a.Name, c.Lane.NodeLabel, err)
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
		VFDriver: l.VFDriver, ImageRegistryMirror: l.ImageRegistryMirror,
		// pkg/cni takes the pod CIDRs k3s gets from config.NetworksOf.
		IPFamily: l.IPFamily,
		Calico:   cni.CalicoOptions{ManifestDir: l.Calico.ManifestDir, CacheDir: statedir.Dir(l.StateDir).Cache()},
		// Without a certificate (plan); up adds one (cni.WithWebhookCerts).
		NetworkResourcesInjector: cni.NRIOptions{Enabled: l.Components.NetworkResourcesInjector},
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
	return cni.Apply(ctx, c.Kube, objs, c.Progress.Detailf)
}

func stepWait(ctx context.Context, c *Session) error {
	ctx, cancel := context.WithTimeout(ctx, c.Lane.WaitTimeout.Duration)
	defer cancel()
	nodes, err := c.Provider.Nodes(ctx, c.Lane.ClusterName())
	if err != nil {
		return err
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if err := cni.WaitNodesReady(ctx, c.Kube.Typed, names); err != nil {
		return err
	}
	// Rollouts first: a component pod that cannot start (image pull,
	// crash) is named by the rollout wait, while allocatable would only
	// time out. The device plugin's pods are what make allocatable appear.
	if err := cni.WaitDaemonSets(ctx, c.Kube.Typed, c.objects); err != nil {
		return err
	}
	// The injector's Deployment, then its webhook reached through the API
	// server: pods created after up get their VFs.
	if err := cni.WaitDeployments(ctx, c.Kube.Typed, c.objects); err != nil {
		return err
	}
	if err := cni.WaitInjectorServing(ctx, c.Kube.Typed, c.objects); err != nil {
		return err
	}
	if c.Lane.CNI == config.CNICalico {
		if err := cni.WaitCalico(ctx, c.Kube.Typed, c.Kube.Dynamic); err != nil {
			return err
		}
	}
	want := map[string]int64{}
	for _, p := range c.placements() {
		want[p.Node] += int64(p.VFs)
	}
	return cni.WaitAllocatable(ctx, c.Kube.Typed, want, c.Lane.Resource())
}
