package sriov_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/sriov-lane/sriov-lane/pkg/journal"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/proc"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
)

// crashEnv is one crash scenario: a rig, target netns and the netns the
// lane runs in ("" = the test's own).
type crashEnv struct {
	r       *rig.Rig
	targets []string
	origin  string
	before  []linkState
}

func (c *crashEnv) env(mode, stateDir string, stopAt int) []string {
	return append(os.Environ(), helperEnv+"="+mode, "SX_SYSFS="+c.r.State.SysfsRoot, "SX_STATE="+stateDir,
		"SX_COUNT="+strconv.Itoa(len(c.targets)), "SX_VFS=2", "SX_TARGETS="+strings.Join(c.targets, ","),
		"SX_STOP_AT="+strconv.Itoa(stopAt))
}

// start runs the test binary in helper mode, forked from a thread inside
// nsPath so the child lives wholly in that netns (as in a CI pod).
func start(t *testing.T, nsPath string, cmd *exec.Cmd) {
	t.Helper()
	var err error
	if nsPath == "" {
		err = cmd.Start()
	} else {
		ns, nerr := netns.GetFromPath(nsPath)
		if nerr != nil {
			t.Fatalf("starting helper: %v", nerr)
		}
		defer ns.Close()
		err = nsutil.Do(ns, cmd.Start)
	}
	if err != nil {
		t.Fatalf("starting helper: %v", err)
	}
}

// up runs the helper lane, killing it with SIGKILL once it reports
// STOPPED at record stopAt; with stopAt 0 it runs to the end and the
// number of journal records is returned.
func (c *crashEnv) up(t *testing.T, stateDir string, stopAt int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = c.env("up", stateDir, stopAt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start(t, c.origin, cmd)
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if stopAt > 0 {
		if !strings.HasPrefix(line, "STOPPED") {
			if err := proc.Kill(cmd); err != nil {
				t.Log(err)
			}
			t.Fatalf("helper did not stop at record %d: %q %s", stopAt, line, stderr.String())
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		return stopAt
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper up: %v: %s", err, stderr.String())
	}
	var n int
	if _, err := fmt.Sscanf(line, "DONE %d", &n); err != nil {
		t.Fatalf("helper up said %q", line)
	}
	return n
}

// down reverses the journal from a new process in nsPath.
func (c *crashEnv) down(t *testing.T, stateDir, nsPath string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = c.env("down", stateDir, 0)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start(t, nsPath, cmd)
	err := cmd.Wait()
	return out.String(), err
}

// verify checks every PF is back in the origin netns as it was found,
// with no VFs, autoprobe on, no leases and nothing pending.
func (c *crashEnv) verify(t *testing.T, stateDir, when string) {
	t.Helper()
	sys := sriov.Sysfs{Root: c.r.State.SysfsRoot}
	for i, pf := range c.r.State.PFs {
		if got := findByMAC(t, c.origin, pf.MAC); got != c.before[i] {
			t.Errorf("%s: PF %s is %+v, want %+v", when, pf.Name, got, c.before[i])
		}
		for _, tg := range c.targets {
			if findByMAC(t, tg, pf.MAC).Found {
				t.Errorf("%s: PF %s still in %s", when, pf.Name, tg)
			}
		}
		if n, _ := sys.ReadAttr(pf.BDF, "sriov_numvfs"); n != "0" {
			t.Errorf("%s: PF %s numvfs %s", when, pf.Name, n)
		}
		if a, _ := sys.ReadAttr(pf.BDF, "sriov_drivers_autoprobe"); a != "1" {
			t.Errorf("%s: PF %s autoprobe %s", when, pf.Name, a)
		}
	}
	if leases, err := sriov.NewLeaser(stateDir).Leases(); err != nil || len(leases) != 0 {
		t.Errorf("%s: leases left: %v %v", when, leases, err)
	}
	entries, err := journal.Read(filepath.Join(stateDir, "lane", "journal.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Undone {
			t.Errorf("%s: journal entry %d (%s) not undone", when, e.Seq, e.Op)
		}
	}
}

// newCrashEnv makes a 2-PF rig and 2 target netns; the first target holds
// a bridge named like PF 0 so the run includes a collision rename.
func newCrashEnv(t *testing.T) *crashEnv {
	c := &crashEnv{r: slotRig(t, 2)}
	for i := range 2 {
		c.targets = append(c.targets, string(targetNetns(t, c.r, fmt.Sprintf("target%d", i))))
	}
	squat(t, c.targets[0], c.r.State.PFs[0].Name)
	return c
}

func (c *crashEnv) snapshot(t *testing.T) {
	c.before = nil
	for _, pf := range c.r.State.PFs {
		c.before = append(c.before, findByMAC(t, c.origin, pf.MAC))
	}
	if !c.before[0].Found || !c.before[1].Found {
		t.Fatalf("PFs not in origin netns: %+v", c.before)
	}
}

// TestKillAtEveryJournalStep kills the lane with SIGKILL after each of its
// journal records and reverses from a new process: every PF must be back.
func TestKillAtEveryJournalStep(t *testing.T) {
	c := newCrashEnv(t)
	c.snapshot(t)
	stateDir := t.TempDir()
	n := c.up(t, stateDir, 0)
	if n < 20 {
		t.Fatalf("only %d journal records in a full run", n)
	}
	if out, err := c.down(t, stateDir, ""); err != nil {
		t.Fatalf("down: %v: %s", err, out)
	}
	c.verify(t, stateDir, "full run")
	t.Logf("a full run writes %d journal records", n)
	displaced := 0 // kills that left a PF outside its netns: proof the kills bite
	for k := 1; k <= n; k++ {
		stateDir := t.TempDir()
		c.up(t, stateDir, k)
		for i, pf := range c.r.State.PFs {
			if findByMAC(t, c.origin, pf.MAC) != c.before[i] {
				displaced++
				break
			}
		}
		if out, err := c.down(t, stateDir, ""); err != nil {
			t.Fatalf("down after kill at record %d: %v: %s", k, err, out)
		}
		c.verify(t, stateDir, fmt.Sprintf("killed at record %d", k))
		if t.Failed() {
			return
		}
	}
	if displaced < n/2 {
		t.Fatalf("only %d of %d kills left a PF displaced", displaced, n)
	}
}

// TestFromNonInitNetns runs the lane from inside a netns (as from a CI
// pod): PFs return there, not to the init netns, and a down run from the
// wrong netns refuses to touch them.
func TestFromNonInitNetns(t *testing.T) {
	c := newCrashEnv(t)
	c.origin = string(targetNetns(t, c.r, "origin"))
	for _, pf := range c.r.State.PFs {
		moveLinkTo(t, pf.MAC, c.origin)
	}
	c.snapshot(t)
	for _, stopAt := range []int{0, 11} {
		stateDir := t.TempDir()
		c.up(t, stateDir, stopAt)
		out, err := c.down(t, stateDir, "")
		if err == nil || !strings.Contains(out, "original network namespace") {
			t.Fatalf("down from the init netns did not refuse: %v: %s", err, out)
		}
		if stopAt == 0 && !findByMAC(t, c.targets[1], c.r.State.PFs[1].MAC).Found {
			t.Fatal("refused down still moved a PF")
		}
		if out, err := c.down(t, stateDir, c.origin); err != nil {
			t.Fatalf("down from origin netns: %v: %s", err, out)
		}
		c.verify(t, stateDir, fmt.Sprintf("non-init netns, stop at %d", stopAt))
		for _, pf := range c.r.State.PFs {
			if findByMAC(t, "", pf.MAC).Found {
				t.Fatalf("PF %s returned to the init netns", pf.Name)
			}
		}
	}
}
