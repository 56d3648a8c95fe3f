package smoke

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// execInPod asks the exec subresource for the command, WebSocket first
// (GET), then SPDY (POST) when the server refuses the upgrade, as kubectl
// does; a refused exec is reported as a command that could not run.
func TestExecInPodFallsBackToSPDY(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		http.Error(w, "upgrades refused here", http.StatusForbidden)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := execInPod(t.Context(), cfg, cs, "default", PodName, Container, "ls", "-l", "/dev/vfio/")
	if out.Err == nil || !slices.Equal(out.Cmd, []string{"ls", "-l", "/dev/vfio/"}) {
		t.Fatalf("exec against a refusing server: %+v", out)
	}
	if s := out.String(); !strings.HasPrefix(s, "`ls -l /dev/vfio/` could not run: ") {
		t.Errorf("String() = %q", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || !strings.HasPrefix(seen[0], "GET ") || !strings.HasPrefix(seen[1], "POST ") {
		t.Fatalf("requests %v, want a WebSocket GET then an SPDY POST", seen)
	}
	for _, r := range seen {
		for _, want := range []string{"/api/v1/namespaces/default/pods/sriov-lane-smoke/exec?", "command=ls", "command=-l", "command=%2Fdev%2Fvfio%2F", "container=smoke", "stdout=true", "stderr=true"} {
			if !strings.Contains(r, want) {
				t.Errorf("%s lacks %s", r, want)
			}
		}
		if strings.Contains(r, "stdin=true") || strings.Contains(r, "tty=true") {
			t.Errorf("%s asks for stdin or a TTY", r)
		}
	}
}
