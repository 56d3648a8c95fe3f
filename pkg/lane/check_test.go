package lane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/provider"
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
