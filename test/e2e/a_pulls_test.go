package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// A lane whose nodes cannot pull an image, tried as a
// new user would: the rig's lane without its imageRegistryMirror, so every
// node pulls its images from their own registries (k3s's sandbox image from
// Docker Hub first), which no build machine can resolve. up says so while
// it waits (pod, node, image, the runtime's reason and what to do) long
// before its timeout, keeps waiting, then fails
// naming the pods that hold the nodes back and undoes itself.
//
// This file's name sorts first on purpose, as a_restart_test.go's does:
// past its cluster's create the test mostly waits out up's timeout, so
// started first it waits while the other lanes compute; started from
// pulls_test.go it was among the last and ended last, on an idle machine.
func TestUpWithoutMirrorSaysNodesCannotPull(t *testing.T) {
	parallelOnRig(t)
	// One agent: the nodes' pulls are the point. The timeout bounds
	// k3d's create of the cluster too, which no event shortens: 10 s
	// alone, 30 s in make test's cluster tier as a rule, but past 90 s
	// (45 s scaled by 2) in CI while the tier's first lanes were created
	// beside it, failing the create before any pod ran, and up to 3m19s
	// once under a heavier load (testutil.CommandBound). The first pull
	// fails seconds into the wait, so the report comes long before the
	// timeout whatever it is. It is the lane's whole life here, so it is
	// the test's length: the tier starts this test first for that.
	timeout := bound.Scaled(2 * time.Minute)
	_, r, l := rigLane(t, 1, func(c *config.Lane) {
		c.Agents = 1
		c.ImageRegistryMirror = ""
		c.WaitTimeout.Duration = timeout
	})

	cmd, lines := startUp(t, l)
	var out []string
	var reported time.Time
	var report, hint string
	for line := range lines {
		out = append(out, line)
		switch {
		case report == "" && strings.HasPrefix(strings.TrimSpace(line), "! pod ") && strings.Contains(line, " cannot pull "):
			reported, report = time.Now(), line
		case report != "" && hint == "" && strings.Contains(line, "imageRegistryMirror"):
			hint = line
		}
	}
	ended := time.Now()
	all := strings.Join(out, "\n")
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("up without a mirror: exit %d, want 1:\n%s", code, all)
	}
	if report == "" {
		t.Fatalf("up never said that a pod cannot pull its image:\n%s", all)
	}
	// Reported when the pull fails, not when the wait gives up: the
	// component pods start pulling seconds into the wait.
	if ahead := ended.Sub(reported); ahead < timeout/2 {
		t.Errorf("the first pull failure was reported only %s before up ended (wait timeout %s)", ahead.Round(time.Second), timeout)
	}
	// k3s pulls its sandbox image at run time (the rancher/k3s image holds
	// none), so on a node that cannot pull, every pod fails there first,
	// before any container image is tried.
	for _, want := range []string{"cannot pull " + provider.K3sPauseImage, " on k3d-" + l.cfg.Name + "-", "(pod sandbox)", "FailedCreatePodSandBox"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q: %s", want, report)
		}
	}
	for _, want := range []string{"imageRegistryMirror (--image-registry-mirror)", "'sriov-lane plan'", "sriov-lane load --name " + l.cfg.Name, "waiting on"} {
		if !strings.Contains(hint, want) {
			t.Errorf("the hint after the first report lacks %q: %q", want, hint)
		}
	}
	// The timeout's error: the nodes, with the pods on them that hold them
	// back, then every pod not Ready, those that cannot pull first.
	for _, want := range []string{
		"waiting for nodes", "cni plugin not initialized",
		"  pod kube-flannel/kube-flannel-ds-",
		"pods not Ready (",
		"cannot pull " + provider.K3sPauseImage,
		"images the nodes cannot pull: ",
		"✓ undo",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("up's output lacks %q:\n%s", want, all)
		}
	}
	assertLaneGone(t, r, l, r.State.PFs)
}
