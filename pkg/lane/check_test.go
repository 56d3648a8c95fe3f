package lane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/pkg/sriov"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func cgroupLine(t *testing.T, root string) CheckResult {
	t.Helper()
	var got []CheckResult
	checkCgroup(root, func(name string, st CheckStatus, msg, hint string) {
		got = append(got, CheckResult{Name: name, Status: st, Message: msg, Hint: hint})
	})
	if len(got) != 1 || got[0].Name != "cgroup" {
		t.Fatalf("checkCgroup(%s) reported %+v, want one cgroup line", root, got)
	}
	return got[0]
}

func TestCheckReportsThisHostsCgroupVersion(t *testing.T) {
	mode, err := provider.DetectCgroup(provider.HostCgroupRoot)
	if err != nil {
		t.Skipf("no cgroup mount to report here: %v", err)
	}
	r := cgroupLine(t, provider.HostCgroupRoot)
	t.Logf("%s %s: %s (%s)", r.Status, r.Name, r.Message, r.Hint)
	if !strings.HasPrefix(r.Message, mode.Describe()) {
		t.Errorf("message %q does not say %q", r.Message, mode.Describe())
	}
	if mode.V1() {
		if r.Status != Warn || !strings.Contains(r.Message, "fail-cgroupv1=false") || r.Hint == "" {
			t.Errorf("cgroup v1 host: %+v", r)
		}
	} else if r.Status != Pass {
		t.Errorf("cgroup v2 host: %+v", r)
	}
}

func TestCheckCgroupUndetectable(t *testing.T) {
	r := cgroupLine(t, "/proc")
	if r.Status != Warn || !strings.Contains(r.Message, "neither cgroup2 nor tmpfs") {
		t.Errorf("%+v", r)
	}
}

func TestInotifyLimitChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		body string
		want CheckStatus
	}{{"128\n", Warn}, {"512\n", Pass}, {"8192\n", Pass}, {"x\n", Warn}} {
		p := filepath.Join(dir, "max_user_instances")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		var got CheckStatus
		var msg, hint string
		checkInotify(p, func(name string, s CheckStatus, m, h string) { got, msg, hint = s, m, h })
		if got != c.want {
			t.Errorf("max_user_instances %q: %s (%s), want %s", c.body, got, msg, c.want)
		}
		if got == Warn && c.body == "128\n" && !strings.Contains(hint, "fs.inotify.max_user_instances=512") {
			t.Errorf("no fix in the hint: %q", hint)
		}
	}
}

// check shows the VFs a PF candidate has now and each one's driver: on a
// NIC whose VFs are already made, that is the driver a netdevice lane's VFs
// will get.
func TestCheckShowsEachVFsDriver(t *testing.T) {
	r := rig.NewForTest(t, 1, testutil.TakeSlot(t).RigPrefix())
	pf := r.State.PFs[0]
	sys := sriov.Sysfs{Root: r.State.SysfsRoot}
	// Made outside any lane, with autoprobe on: the VF driver takes them.
	if err := sriov.WriteFile(sys.Attr(pf.BDF, "sriov_numvfs"), "2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sriov.WriteFile(sys.Attr(pf.BDF, "sriov_numvfs"), "0"); err != nil {
			t.Errorf("removing the VFs: %v", err)
		}
	})
	vfs := sys.ListVFs(pf.BDF)
	if len(vfs) != 2 || vfs[0].Driver == "" {
		t.Fatalf("VFs made: %+v", vfs)
	}
	if err := sriov.WriteFile(sys.DriverFile(vfs[1].Driver, "unbind"), vfs[1].PCI); err != nil {
		t.Fatal(err)
	}
	l := config.Default()
	l.SysfsRoot, l.StateDir = r.State.SysfsRoot, t.TempDir()
	l.PFs.Include = []string{pf.Name}
	c := &Checker{Lane: l, PFs: PFReportFunc(l)}
	var line *CheckResult
	c.checkPFs(t.Context(), func(r CheckResult) {
		if r.Name == "pf "+pf.Name {
			line = &r
		}
	})
	if line == nil {
		t.Fatalf("no check line for %s", pf.Name)
	}
	want := "2 VFs: " + vfs[0].PCI + " " + vfs[0].Driver + ", " + vfs[1].PCI + " none"
	if !strings.Contains(line.Message, want) {
		t.Errorf("check line %q does not say %q", line.Message, want)
	}
}
