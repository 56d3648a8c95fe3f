package lane

import (
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
