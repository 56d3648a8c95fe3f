package scenario

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig/nsutil"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
	"github.com/sriov-lane/sriov-lane/test/vfiouser"
)

// Fake is the rig's fake kernel (test/rig/sysfs) standing in for an 82576
// (igb PFs, igbvf VFs, 7 VFs a PF, like QEMU's igb): its sysfs and
// /dev/vfio served over FUSE in a temp dir, veth links as the PFs'
// netdevs. It is meant to run in a netns of its own (RunFake), so the
// PFs can have the guest's names and nothing touches the host's links.
type Fake struct {
	root, vfio string
	pfs        []PF
	log        *kernelLog
}

// fakePFs are the guest's PF names (igb in the kernel tier's guest, no
// udev: eth0, eth1).
var fakePFs = []string{"eth0", "eth1"}

// NewFake serves the fake for t: root and FUSE are required (skip, or
// fail under SRIOV_LANE_TEST_STRICT=1). Everything goes at t's end.
func NewFake(t testing.TB) *Fake {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if testutil.Strict() {
			t.Fatalf("prerequisite missing under SRIOV_LANE_TEST_STRICT=1: FUSE (/dev/fuse): %v", err)
		}
		t.Skipf("the fake kernel needs FUSE: %v", err)
	}
	dropStalePeers(t)
	peers := fmt.Sprintf("%s%d", peersPrefix, os.Getpid())
	peerNs := nsutil.ForTest(t, peers)
	var pfs []sysfs.PF
	f := &Fake{log: &kernelLog{t: t}}
	for i, name := range fakePFs {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: fmt.Sprintf("wire%d", i),
			PeerNamespace: netlink.NsFd(int(peerNs))}
		if err := netlink.LinkAdd(veth); err != nil {
			t.Fatalf("stand-in PF %s: %v", name, err)
		}
		t.Cleanup(func() {
			if l, err := netlink.LinkByName(name); err == nil {
				_ = netlink.LinkDel(l)
			}
		})
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		pfs = append(pfs, sysfs.PF{Name: name, MAC: l.Attrs().HardwareAddr.String()})
		f.pfs = append(f.pfs, PF{BDF: sysfs.PFBDF(i), Name: name})
	}
	dir := t.TempDir()
	f.root, f.vfio = filepath.Join(dir, "sys"), filepath.Join(dir, "vfio")
	sysfs.ServeForTest(t, sysfs.ServeConfig{SysfsDir: f.root, VFIODir: f.vfio, KernelConfig: sysfs.KernelConfig{
		PFs: pfs, VFDriver: "igbvf", PeerNetns: peers, Log: log.New(f.log, "fake kernel: ", 0)}})
	return f
}

// peersPrefix names the netns of a Fake's private link ends, by the PID
// of the process that made it.
const peersPrefix = "sl-scen-"

// dropStalePeers deletes the peer netns of Fakes whose process is gone (a
// child RunFake started that was killed leaves its netns mounted).
func dropStalePeers(t testing.TB) {
	ents, _ := os.ReadDir(filepath.Dir(nsutil.Path("x")))
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), peersPrefix))
		if !strings.HasPrefix(e.Name(), peersPrefix) || err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			if err := nsutil.Delete(e.Name()); err != nil {
				t.Logf("stale netns %s: %v", e.Name(), err)
			}
		}
	}
}

// kernelLog is the fake kernel's log: lines to the test's log, kept to
// be read as /dev/kmsg is (DeviceRequests).
type kernelLog struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func (l *kernelLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	l.t.Log(line)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return len(p), nil
}

// DeviceRequests counts the fake kernel's request lines about bdf, read as
// the real kernel's records are (countRequests).
func (f *Fake) DeviceRequests(bdf string) (int, error) {
	f.log.mu.Lock()
	lines := append([]string(nil), f.log.lines...)
	f.log.mu.Unlock()
	return countRequests(func(buf []byte) (int, error) {
		if len(lines) == 0 {
			return 0, unix.EAGAIN
		}
		n := copy(buf, lines[0])
		lines = lines[1:]
		return n, nil
	}, bdf)
}

func (*Fake) Name() string         { return "fake" }
func (*Fake) Where() string        { return "fake" }
func (f *Fake) Sysfs() sriov.Sysfs { return sriov.Sysfs{Root: f.root} }
func (f *Fake) VFIODir() string    { return f.vfio }
func (f *Fake) PFs() []PF          { return f.pfs }

// HoldDevice holds the device through the fake's model of a device fd
// (test/vfiouser HoldDevice; test/rig/sysfs Kernel, "VFIO").
func (f *Fake) HoldDevice(group, bdf string) (DeviceHold, error) {
	return vfiouser.HoldDevice(f.vfio, group, bdf)
}

// fakeOutEnv names the file the child of RunFake writes its transcript to.
const fakeOutEnv = "SRIOV_LANE_SCENARIO_FAKE_OUT"

// RunFake runs the scenario on the fake in a netns of its own: it runs
// this test binary again, in a new netns (CLONE_NEWNET), with only the test
// childTest, which must call FakeChild. The child's output goes to t's log.
func RunFake(t *testing.T, childTest string) *Transcript {
	t.Helper()
	testutil.RequireRoot(t)
	out := filepath.Join(t.TempDir(), "fake.json")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+childTest+"$", "-test.count=1", "-test.v",
		"-test.timeout=5m")
	cmd.Env = append(os.Environ(), fakeOutEnv+"="+out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.CombinedOutput()
	t.Logf("fake scenario in its own netns:\n%s", b)
	if err != nil {
		t.Fatalf("the fake scenario's child (%s): %v", childTest, err)
	}
	if strings.Contains(string(b), "--- SKIP: "+childTest) {
		t.Skipf("the fake scenario's child skipped (see its output)")
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the fake scenario's transcript: %v", err)
	}
	var tr Transcript
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("decoding the fake scenario's transcript: %v", err)
	}
	return &tr
}

// FakeChild is the child RunFake starts: it runs the scenario on a Fake
// and writes the transcript where the parent said. Run any other way it
// skips.
func FakeChild(t *testing.T) {
	out := os.Getenv(fakeOutEnv)
	if out == "" {
		t.Skip("runs only as the child RunFake starts in a netns of its own")
	}
	tr, err := Run(t.Context(), NewFake(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(out, tr); err != nil {
		t.Fatal(err)
	}
}

// WriteJSON writes a transcript, indented, to path.
func WriteJSON(path string, tr *Transcript) error {
	b, err := json.MarshalIndent(tr, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
