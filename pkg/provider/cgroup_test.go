package provider

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/k3d-io/k3d/v5/pkg/config/v1alpha5"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// mountFSType reads the filesystem type of the mount at dir from
// /proc/self/mountinfo: an oracle independent of statfs.
func mountFSType(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fsType := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 || fields[4] != dir {
			continue
		}
		fsType = strings.Fields(post)[0] // the last mount on dir is the one seen
	}
	return fsType
}

func TestDetectCgroupMatchesThisHostsMounts(t *testing.T) {
	got, err := DetectCgroup(HostCgroupRoot)
	var want CgroupMode
	switch mountFSType(t, HostCgroupRoot) {
	case "cgroup2":
		want = CgroupV2
	case "tmpfs":
		want = CgroupV1
		if mountFSType(t, HostCgroupRoot+"/unified") == "cgroup2" {
			want = CgroupHybrid
		}
	default:
		t.Skipf("%s is no cgroup mount here", HostCgroupRoot)
	}
	if err != nil || got != want {
		t.Fatalf("DetectCgroup(%s) = %q, %v; mountinfo says %q", HostCgroupRoot, got, err, want)
	}
	t.Logf("this host: %s", got.Describe())
}

func TestDetectCgroupRejectsOtherFilesystems(t *testing.T) {
	if m, err := DetectCgroup("/proc"); err == nil || m != CgroupUnknown || !strings.Contains(err.Error(), "/proc is neither cgroup2 nor tmpfs") {
		t.Errorf("procfs: %q, %v", m, err)
	}
	if m, err := DetectCgroup("/nonexistent/cgroup"); err == nil || m != CgroupUnknown || !strings.Contains(err.Error(), "statfs /nonexistent/cgroup") {
		t.Errorf("missing mount: %q, %v", m, err)
	}
}

func TestCgroupNotesAndKubeletArg(t *testing.T) {
	for _, c := range []struct {
		mode CgroupMode
		v1   bool
	}{{CgroupV1, true}, {CgroupHybrid, true}, {CgroupV2, false}, {CgroupUnknown, false}} {
		if c.mode.V1() != c.v1 {
			t.Errorf("%q.V1() = %v", c.mode, !c.v1)
		}
		notes := HostFacts{Cgroup: c.mode}.Notes()
		if c.v1 != (len(notes) == 1 && strings.Contains(notes[0], "passing kubelet fail-cgroupv1=false to every node") && strings.Contains(notes[0], "cgroup v1")) {
			t.Errorf("%q: notes %q", c.mode, notes)
		}
		sc, err := ClusterConfig(config.Default(), HostFacts{VFIODir: true, LibModules: true, Cgroup: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(sc.Options.K3sOptions.ExtraArgs, func(a v1alpha5.K3sArgWithNodeFilters) bool { return a.Arg == "--kubelet-arg=fail-cgroupv1=false" })
		if (i >= 0) != c.v1 {
			t.Errorf("%q: fail-cgroupv1 arg present = %v", c.mode, i >= 0)
		}
	}
}
