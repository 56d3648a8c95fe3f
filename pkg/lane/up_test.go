package lane

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/config"
)

// up --retain must reach the provider, which otherwise removes what a failed
// k3d create made before anyone can look at it; and the provider's notes
// about the host are shown without -v.
func TestUpOptionsReachTheClusterCreate(t *testing.T) {
	for _, retain := range []bool{true, false} {
		var out bytes.Buffer
		c := newUpSession(config.Default(), UpOptions{Out: &out, Retain: retain}, nil, NewProgress(&out, false))
		o := createOptions(c)
		if o.Retain != retain {
			t.Errorf("UpOptions.Retain %v reaches CreateOptions.Retain as %v", retain, o.Retain)
		}
		if o.Note == nil || o.Progress == nil {
			t.Fatalf("create options lack Note or Progress: %+v", o)
		}
		o.Note("host uses cgroup v1: passing kubelet fail-cgroupv1=false to every node")
		o.Progress("k3d-sriov-agent-0", "running")
		if got := out.String(); !strings.Contains(got, "fail-cgroupv1=false") || strings.Contains(got, "running") {
			t.Errorf("without -v the note must show and progress detail must not:\n%s", got)
		}
	}
}
