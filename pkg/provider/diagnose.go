package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
)

// logTailLines is how much of a failed node's log an error quotes.
const logTailLines = 20

// diagnoseTimeout bounds listing the containers and reading a log tail for
// a failed create's error, on a fresh context since the create's may be
// what expired: two Docker calls, each answered in well under a second.
const diagnoseTimeout = 20 * time.Second

// nodeWatchInterval is how often Create lists the cluster's containers to
// report their states: often enough to show each step of a node's start,
// one cheap Docker call each.
const nodeWatchInterval = 250 * time.Millisecond

// nodeProgress is the one line of a node's (or the registry's) progress:
// detail, shown under -v.
func nodeProgress(lg log.Logger, node, state string) { lg.V(1).Infof("%s: %s", node, state) }

// watchNodes reports each cluster container's state changes at V(1) until
// ctx ends. k3d offers no progress hook, so the lane watches Docker instead.
func (p *Provider) watchNodes(ctx context.Context, cluster string, lg log.Logger) {
	seen := map[string]string{}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		list, err := p.docker.ContainerList(ctx, container.ListOptions{
			All:     true,
			Filters: filters.NewArgs(filters.Arg("label", labelK3dCluster+"="+cluster)),
		})
		if err != nil {
			return
		}
		sort.Slice(list, func(i, j int) bool { return fmt.Sprint(list[i].Names) < fmt.Sprint(list[j].Names) })
		for _, c := range list {
			if len(c.Names) == 0 {
				continue
			}
			n := trimSlash(c.Names[0])
			if seen[n] != c.State {
				seen[n] = c.State
				nodeProgress(lg, n, c.State)
			}
		}
	}, nodeWatchInterval)
}

// explainFailure adds to a create error the node it is about and the last
// lines of that node's log: k3d's own errors say "failed to get ready" and
// little else.
func (p *Provider) explainFailure(ctx context.Context, l *config.Lane, err error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
	defer cancel()
	name := l.ClusterName()
	list, lerr := p.docker.ContainerList(dctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", labelK3dCluster+"="+name)),
	})
	if lerr != nil {
		return fmt.Errorf("%w\n(listing the cluster's containers for diagnosis failed: %v)", err, lerr)
	}
	byName := map[string]container.Summary{}
	for _, c := range list {
		if len(c.Names) > 0 {
			byName[trimSlash(c.Names[0])] = c
		}
	}
	culprit := blame(err.Error(), append(nodeNames(l), toolsName(name)), byName)
	if culprit == "" {
		return fmt.Errorf("%w\n(no node container of %s exists; nothing to show)", err, name)
	}
	c, ok := byName[culprit]
	if !ok {
		return fmt.Errorf("%w\nnode %s: its container was never created", err, culprit)
	}
	tail, terr := p.logTail(dctx, c.ID, logTailLines)
	if terr != nil {
		return fmt.Errorf("%w\nnode %s (%s): reading its log failed: %v", err, culprit, c.Status, terr)
	}
	if strings.TrimSpace(tail) == "" {
		tail = "(empty)"
	}
	return fmt.Errorf("%w\nnode %s (%s), last %d log lines:\n%s", err, culprit, c.Status, logTailLines, indent(tail))
}

// blame picks the node an error is about: the longest node name the message
// mentions (agent-1 must not match agent-10), else a container that is not
// running, else none.
func blame(msg string, names []string, have map[string]container.Summary) string {
	sorted := append([]string{}, names...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	for _, n := range sorted {
		if strings.Contains(msg, n) {
			return n
		}
	}
	for _, n := range names {
		if c, ok := have[n]; ok && c.State != "running" {
			return n
		}
	}
	return ""
}

func (p *Provider) logTail(ctx context.Context, id string, lines int) (string, error) {
	rc, err := p.docker.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(lines)})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	var buf bytes.Buffer
	// Node containers have no TTY: the log is multiplexed.
	if _, err := stdcopy.StdCopy(&buf, &buf, io.LimitReader(rc, 1<<20)); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
