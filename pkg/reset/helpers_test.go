package reset

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/test/bound"
)

// obj builds a cluster object of the type named "group/version/resource".
func obj(gvr, kind, name, uid string) clusterObject {
	parts := strings.Split(gvr, "/")
	return clusterObject{objectRef: objectRef{Group: parts[0], Version: parts[1], Resource: parts[2], Kind: kind, Name: name, UID: types.UID(uid)}}
}

func ns(name, uid string) clusterObject { return obj("/v1/namespaces", "Namespace", name, uid) }

func terminating(o clusterObject) clusterObject {
	o.Deleting = true
	return o
}

func withLabels(o clusterObject, kv ...string) clusterObject {
	o.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		o.Labels[kv[i]] = kv[i+1]
	}
	return o
}

func names(objs []clusterObject) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.String())
	}
	slices.Sort(out)
	return out
}

const (
	clusterRoles = "rbac.authorization.k8s.io/v1/clusterroles"
	crds         = "apiextensions.k8s.io/v1/customresourcedefinitions"
)

// bounded is the test's context, done after d.
func bounded(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), bound.Scaled(d))
	t.Cleanup(cancel)
	return ctx
}

// testLogger shows what reset logs, -v detail included, in the test's log.
func testLogger(t *testing.T) log.Logger { return log.NewPrinter(testWriter{t}, true) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
