package provider

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	k3dclient "github.com/k3d-io/k3d/v5/pkg/client"
	"github.com/k3d-io/k3d/v5/pkg/runtimes"
	k3d "github.com/k3d-io/k3d/v5/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sriov-lane/sriov-lane/pkg/atomicfile"
)

// WriteKubeconfig writes the cluster's admin kubeconfig (server URL on the
// exposed 127.0.0.1 API port) to path with mode 0600, replacing the file
// atomically. It writes nowhere else: ~/.kube/config changes only if that
// is the path asked for.
func (p *Provider) WriteKubeconfig(ctx context.Context, cluster, dest string) error {
	kc, err := k3dclient.KubeconfigGet(ctx, runtimes.Docker, &k3d.Cluster{Name: cluster})
	if err != nil {
		return fmt.Errorf("reading kubeconfig of cluster %s: %w", cluster, err)
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig of cluster %s: %w", cluster, err)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return fmt.Errorf("writing kubeconfig of cluster %s: %w", cluster, err)
	}
	if err := atomicfile.Write(dest, b, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig of cluster %s: %w", cluster, err)
	}
	return nil
}

// kubectlSource is k3s's multi-call binary: run under the name kubectl it is
// a kubectl of exactly the server's version.
const kubectlSource = "/bin/k3s"

// CopyKubectl copies k3s's multi-call binary out of the server node to dest
// (mode 0755), for tools that want a kubectl matching the cluster (name it
// kubectl: the binary picks its personality from its name). No download.
func (p *Provider) CopyKubectl(ctx context.Context, cluster, dest string) error {
	nodes, err := p.Nodes(ctx, cluster)
	if err != nil {
		return err
	}
	if len(nodes) == 0 || nodes[0].Role != RoleServer {
		return fmt.Errorf("copying kubectl: cluster %s has no server node", cluster)
	}
	srv := nodes[0]
	src := kubectlSource
	// Follow at most a few symlinks: images may link /bin/k3s elsewhere.
	for hops := 0; hops < 4; hops++ {
		link, err := p.copyOut(ctx, srv, src, dest)
		if err != nil {
			return fmt.Errorf("copying kubectl (%s) from %s: %w", src, srv.Name, err)
		}
		if link == "" {
			return nil
		}
		if !path.IsAbs(link) {
			link = path.Join(path.Dir(src), link)
		}
		src = link
	}
	return fmt.Errorf("copying kubectl from %s: too many symlinks at %s", srv.Name, kubectlSource)
}

// copyOut writes the regular file at src in the node to dest, or returns
// the target when src is a symlink.
func (p *Provider) copyOut(ctx context.Context, n Node, src, dest string) (symlink string, err error) {
	rc, _, err := p.docker.CopyFromContainer(ctx, n.ContainerID, src)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		return "", fmt.Errorf("reading archive: %w", err)
	}
	switch h.Typeflag {
	case tar.TypeSymlink:
		return h.Linkname, nil
	case tar.TypeReg:
	default:
		return "", fmt.Errorf("%s is not a regular file (tar type %q)", src, h.Typeflag)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	return "", atomicfile.WriteFrom(dest, tr, 0o755)
}
