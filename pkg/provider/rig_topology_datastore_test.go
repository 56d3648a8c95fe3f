package provider

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/test/bound"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// On the rig: the topology manager flags reach the agents' k3s (kubelet)
// command lines, and the server's datastore dir is a tmpfs that holds the
// stand-in's etcd, as it would k3s's. Read through the Docker API.
func TestRigTopologyAndDatastoreTmpfs(t *testing.T) {
	p, cli := rig(t)
	slot := testutil.TakeSlot(t)
	name := slot.Lane(0)
	l := testLane(t, slot, 1)
	l.Kubelet.TopologyManagerPolicy = config.TopologyPolicyRestricted
	l.Kubelet.TopologyManagerScope = config.TopologyScopePod
	// Cleanups run last-registered first: this check runs after the delete.
	t.Cleanup(func() {
		if _, err := cli.VolumeInspect(context.Background(), DatastoreVolumeName(name)); !cerrdefs.IsNotFound(err) {
			t.Errorf("volume %s left after delete (%v)", DatastoreVolumeName(name), err)
		}
	})
	cleanupLane(t, p, cli, name)
	ctx := context.Background()
	if err := p.Create(ctx, l, CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}

	agent, err := cli.ContainerInspect(ctx, NodeName(name, RoleAgent, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--kubelet-arg=topology-manager-policy=restricted", "--kubelet-arg=topology-manager-scope=pod", "--kubelet-arg=cpu-manager-policy=static"} {
		if !slices.Contains(agent.Args, want) && !slices.Contains(agent.Config.Cmd, want) {
			t.Errorf("agent command %v lacks %s", agent.Config.Cmd, want)
		}
	}
	srv, err := cli.ContainerInspect(ctx, NodeName(name, RoleServer, 0))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(srv.Config.Cmd, func(s string) bool { return strings.Contains(s, "topology-manager") }) {
		t.Errorf("server got the agents' topology flags: %v", srv.Config.Cmd)
	}
	var found bool
	for _, m := range srv.Mounts {
		if m.Destination == ServerDatastoreDir {
			found = true
			if m.Name != DatastoreVolumeName(name) {
				t.Errorf("%s is volume %q, want %s", ServerDatastoreDir, m.Name, DatastoreVolumeName(name))
			}
		}
	}
	if !found {
		t.Fatalf("server has no mount at %s: %+v", ServerDatastoreDir, srv.Mounts)
	}
	for _, m := range agent.Mounts {
		if m.Destination == ServerDatastoreDir {
			t.Errorf("agent has the datastore mount: %+v", m)
		}
	}
	vol, err := cli.VolumeInspect(ctx, DatastoreVolumeName(name))
	if err != nil {
		t.Fatal(err)
	}
	if vol.Options["type"] != "tmpfs" || vol.Labels[labelK3dCluster] != name {
		t.Errorf("volume options %v labels %v", vol.Options, vol.Labels)
	}
	// Inside the server: the dir is a tmpfs mount, and etcd's data is on it.
	r, err := p.exec(ctx, srv.ID, []string{"cat", "/proc/mounts"}, nil)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("reading the server's mounts: %v %+v", err, r)
	}
	var fstype string
	for _, line := range strings.Split(r.Stdout, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == ServerDatastoreDir {
			fstype = f[2]
		}
	}
	if fstype != "tmpfs" {
		t.Errorf("%s in the server is %q, want tmpfs:\n%s", ServerDatastoreDir, fstype, r.Stdout)
	}
	r, err = p.exec(ctx, srv.ID, []string{"ls", ServerDatastoreDir + "/etcd/member"}, nil)
	if err != nil || r.ExitCode != 0 || !strings.Contains(r.Stdout, "wal") {
		t.Errorf("etcd data not under %s/etcd: %v %+v", ServerDatastoreDir, err, r)
	}
	checkRestartEmptiesDatastore(ctx, t, p, cli, name)
}

// checkRestartEmptiesDatastore restarts the server of a lane whose
// datastore is on a tmpfs, as dockerd's restart does: its CA and
// credentials (outside the datastore, in the image's VOLUME) stay, so the
// kubeconfig handed out before still reaches it, and the tmpfs comes back
// empty, so what the cluster held is gone.
func checkRestartEmptiesDatastore(ctx context.Context, t *testing.T, p *Provider, cli *client.Client, name string) {
	t.Helper()
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.WriteKubeconfig(ctx, name, kcPath); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kcPath)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-restart", Namespace: "default"}}
	if _, err := kc.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ConfigMap before the restart: %v", err)
	}
	timeout := 10
	if err := cli.ContainerRestart(ctx, NodeName(name, RoleServer, 0), container.StopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	// Until the ConfigMap is gone; an x509 refusal or the ConfigMap still
	// there ends the wait with that failure. Each Get runs on ctx, not the
	// poll's context, so the last one's error is what the server gave.
	var lastErr error // the last Get's error
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, bound.Scaled(90*time.Second), true, func(context.Context) (bool, error) {
		_, lastErr = kc.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(lastErr) {
			return true, nil
		}
		var unknownCA x509.UnknownAuthorityError
		if errors.As(lastErr, &unknownCA) || (lastErr != nil && strings.Contains(lastErr.Error(), "x509:")) {
			return false, fmt.Errorf("the restarted server refused the kubeconfig handed out before (its CA or serving certificate changed): %v", lastErr)
		}
		if lastErr == nil {
			return false, errors.New("ConfigMap before-restart survived a restart with the datastore on a tmpfs")
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		t.Fatalf("the server's API after its restart: %v", lastErr)
	} else if err != nil {
		t.Fatal(err)
	}
}

// assertDatastoreOnDisk: with datastoreOnTmpfs false no volume is made and
// the dir is the container's own (TestRigCreateInspectRestartDelete's cluster).
func assertDatastoreOnDisk(t *testing.T, cli *client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cli.VolumeInspect(ctx, DatastoreVolumeName(name)); !cerrdefs.IsNotFound(err) {
		t.Errorf("volume %s exists with datastoreOnTmpfs false (%v)", DatastoreVolumeName(name), err)
	}
	srv, err := cli.ContainerInspect(ctx, NodeName(name, RoleServer, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.Mounts {
		if m.Destination == ServerDatastoreDir {
			t.Errorf("server has a mount at %s: %+v", ServerDatastoreDir, m)
		}
	}
}
