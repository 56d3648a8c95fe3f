package lane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
)

// ExportLogs writes everything needed to debug a lane from a CI artifact
// alone into dir/<lane>: node container logs, pod logs and events, each
// node's links, the SR-IOV sysfs state of the lane's PFs, the journal and the
// saved config. It changes nothing and keeps going past what it cannot read,
// listing those failures in errors.txt. engines are the command run's
// clients of the container engines.
func ExportLogs(ctx context.Context, l *config.Lane, engines *provider.Engines, dir string) (string, error) {
	out := filepath.Join(dir, l.Name)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	var problems []string
	note := func(what string, err error) {
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", what, err))
		}
	}
	note("journal", copyFile(l.Dir().Journal(), filepath.Join(out, "journal.jsonl")))
	note("lane config", copyFile(l.Dir().SavedConfig(), filepath.Join(out, "lane.yaml")))

	cli, err := engines.Client(l.ContainerEngine)
	if err != nil {
		return out, err
	}
	p := provider.NewWithClient(cli)
	nodes, err := p.Nodes(ctx, l.ClusterName())
	note("listing nodes", err)
	for _, n := range nodes {
		nd := filepath.Join(out, "nodes", n.Name)
		if err := os.MkdirAll(nd, 0o755); err != nil {
			note(n.Name, err)
			continue
		}
		note(n.Name+" logs", containerLogs(ctx, cli, n.ContainerID, filepath.Join(nd, "container.log")))
		note(n.Name+" links", nodeLinks(ctx, sriov.ContainerTarget{ID: n.ContainerID, Name: n.Name, Docker: cli}, filepath.Join(nd, "links.txt")))
	}
	note("registry logs", containerLogs(ctx, cli, provider.RegistryName(l.ClusterName()), filepath.Join(out, "registry.log")))

	if entries, err := journal.Read(l.Dir().Journal()); err != nil {
		note("reading the journal for the sysfs state", err)
	} else {
		note("sysfs state", sysfsState(sriov.Sysfs{Root: l.SysfsRoot}, sriov.Placements(entries), filepath.Join(out, "sriov-sysfs.txt")))
	}
	switch kc, err := connectKube(l); {
	case err != nil:
		note("cluster", err)
	case kc == nil:
		problems = append(problems, "cluster: no kubeconfig for the lane")
	default:
		note("cluster", clusterState(ctx, kc.Typed, out))
	}
	if len(problems) > 0 {
		if err := os.WriteFile(filepath.Join(out, "errors.txt"), []byte(strings.Join(problems, "\n")+"\n"), 0o644); err != nil {
			return out, fmt.Errorf("writing the export's errors.txt: %w; it would have listed: %s", err, strings.Join(problems, "; "))
		}
	}
	return out, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func containerLogs(ctx context.Context, cli *client.Client, id, dst string) error {
	rc, err := cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	// Node containers run without a TTY: the stream is multiplexed.
	if _, err := stdcopy.StdCopy(f, f, rc); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func nodeLinks(ctx context.Context, node sriov.NetnsTarget, dst string) error {
	links, err := sriov.Links(ctx, node)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, l := range links {
		a := l.Attrs()
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\tmtu %d\t%s\n", a.Index, a.Name, l.Type(), a.HardwareAddr, a.MTU, a.OperState)
	}
	return os.WriteFile(dst, []byte(b.String()), 0o644)
}

func sysfsState(sys sriov.Sysfs, placements []sriov.Placement, dst string) error {
	var b strings.Builder
	for _, p := range placements {
		fmt.Fprintf(&b, "%s (%s) in %s as %s\n", p.PF.Name, p.PF.PCI, p.Node, p.NameInNode)
		for _, attr := range []string{"sriov_totalvfs", "sriov_numvfs", "sriov_drivers_autoprobe"} {
			v, err := sys.ReadAttr(p.PF.PCI, attr)
			if err != nil {
				v = "error: " + err.Error()
			}
			fmt.Fprintf(&b, "  %s: %s\n", attr, v)
		}
		drivers := sys.VFDrivers(p.PF.PCI)
		keys := make([]string, 0, len(drivers))
		for k := range drivers {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  VFs bound to %s: %d\n", k, drivers[k])
		}
	}
	return os.WriteFile(dst, []byte(b.String()), 0o644)
}

func clusterState(ctx context.Context, cs kubernetes.Interface, out string) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(out, "nodes.json"), nodes); err != nil {
		return err
	}
	events, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var b strings.Builder
	sort.Slice(events.Items, func(i, j int) bool { return events.Items[i].LastTimestamp.Before(&events.Items[j].LastTimestamp) })
	for _, e := range events.Items {
		fmt.Fprintf(&b, "%s\t%s\t%s/%s %s\t%s\t%s\n", e.LastTimestamp.UTC().Format("15:04:05"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	if err := os.WriteFile(filepath.Join(out, "events.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(out, "pods.json"), pods); err != nil {
		return err
	}
	var errs []error
	for _, pod := range pods.Items {
		for _, c := range pod.Spec.Containers {
			raw, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("logs of %s/%s[%s]: %w", pod.Namespace, pod.Name, c.Name, err))
				continue
			}
			d := filepath.Join(out, "pods", pod.Namespace)
			if err := os.MkdirAll(d, 0o755); err != nil {
				errs = append(errs, fmt.Errorf("logs of %s/%s[%s]: %w", pod.Namespace, pod.Name, c.Name, err))
				continue
			}
			if err := os.WriteFile(filepath.Join(d, pod.Name+"_"+c.Name+".log"), raw, 0o644); err != nil {
				errs = append(errs, fmt.Errorf("logs of %s/%s[%s]: %w", pod.Namespace, pod.Name, c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}
