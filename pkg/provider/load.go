package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Load imports host images into every node of the cluster (the `kind load
// docker-image` habit): one `docker save` stream from the daemon, fanned
// out to an import command run in each node through the Docker API. With
// real k3s nodes the command is k3s's `ctr images import`, which puts the
// images into the k8s.io namespace kubelet uses.
func (p *Provider) Load(ctx context.Context, cluster string, images ...string) error {
	if len(images) == 0 {
		return errors.New("load: no images given")
	}
	// Every missing image at once: with --plan-images a user pulls them
	// all before trying again.
	var missing []error
	for _, img := range images {
		if _, err := p.docker.ImageInspect(ctx, img); err != nil {
			missing = append(missing, fmt.Errorf("image %s is not on the host (pull or build it first): %w", img, err))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	nodes, err := p.Nodes(ctx, cluster)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return fmt.Errorf("load: cluster %s has no nodes", cluster)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.docker.ImageSave(ctx, images)
	if err != nil {
		return fmt.Errorf("load: saving %v from the host: %w", images, err)
	}
	defer stream.Close()

	writers := make([]io.Writer, len(nodes))
	pipes := make([]*io.PipeWriter, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		pr, pw := io.Pipe()
		writers[i], pipes[i] = pw, pw
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.run(ctx, n.ContainerID, p.importCmd, pr)
			if err != nil {
				errs[i] = fmt.Errorf("importing %v into node %s: %w", images, n.Name, err)
				// Unblock the fan-out: a node that stopped reading must
				// fail the copy, not hang it.
				pr.CloseWithError(errs[i])
				return
			}
			// A command that exits without reading everything would
			// otherwise block the other nodes.
			_, _ = io.Copy(io.Discard, pr)
		}()
	}
	_, copyErr := io.Copy(io.MultiWriter(writers...), stream)
	for _, pw := range pipes {
		if copyErr != nil {
			pw.CloseWithError(copyErr)
		} else {
			pw.Close()
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("load into %s: %w", cluster, err)
	}
	if copyErr != nil {
		return fmt.Errorf("load into %s: streaming %v: %w", cluster, images, copyErr)
	}
	return nil
}
