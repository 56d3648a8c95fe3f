package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"
)

// defaultCacheRoot holds the built tools, the rig registry's storage and
// test-env's lock; SRIOV_LANE_CACHE_ROOT moves it (a CI cache volume, or an
// empty directory to time a cold build).
const defaultCacheRoot = "/var/cache/sriov-lane"

// defaultRigRegistryPort is the rig registry's port on the host network
// unless SRIOV_LANE_RIG_REGISTRY_PORT says another.
const defaultRigRegistryPort = 5055

type envOptions struct {
	root, cache  string
	registryPort int
	forceImages  bool
	only         []string // phase names to run, all when empty
}

// newEnv is the part of `make test-env` after the host's set-up
// (packages, the runc shim, dockerd, sysctls: hack/test-env.sh, which runs
// this last): the tools built from Go modules, the stand-in images and the
// rig registry serving them. Each is made only when what it is made from
// changed (contentKey), so a second run builds nothing.
func newEnv() *cobra.Command {
	o := envOptions{cache: defaultCacheRoot, registryPort: defaultRigRegistryPort}
	if v := os.Getenv("SRIOV_LANE_CACHE_ROOT"); v != "" {
		o.cache = v
	}
	if v, err := strconv.Atoi(os.Getenv("SRIOV_LANE_RIG_REGISTRY_PORT")); err == nil {
		o.registryPort = v
	}
	o.forceImages = os.Getenv("SRIOV_LANE_FORCE_IMAGES") == "1"
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Build the test tools and stand-in images and serve them from the rig registry (make test-env runs it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.root == "" {
				return fmt.Errorf("--root is required")
			}
			root, err := filepath.Abs(o.root)
			if err != nil {
				return err
			}
			o.root = root
			l := &envLog{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
			if err := runEnv(cmd.Context(), o, l); err != nil {
				l.end()
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.root, "root", "", "the sriov-lane checkout (bin/test-assets is written under it)")
	cmd.Flags().StringVar(&o.cache, "cache", o.cache, "cache directory for built tools and the rig registry's storage ($SRIOV_LANE_CACHE_ROOT)")
	cmd.Flags().IntVar(&o.registryPort, "registry-port", o.registryPort, "host port of the rig registry ($SRIOV_LANE_RIG_REGISTRY_PORT)")
	cmd.Flags().StringSliceVar(&o.only, "only", nil, "run only these phases (e.g. --only kernels), for working on one; their inputs must be there already")
	cmd.Flags().BoolVar(&o.forceImages, "force-images", o.forceImages, "rebuild every image even when its content key matches ($SRIOV_LANE_FORCE_IMAGES=1)")
	return cmd
}

func runEnv(ctx context.Context, o envOptions, l *envLog) error {
	assets := filepath.Join(o.root, "bin", "test-assets")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return err
	}
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer docker.Close()
	images, err := newImager(docker, l, o.forceImages)
	if err != nil {
		return err
	}
	e := &env{o: o, l: l, assets: assets, b: &builder{root: o.root, cache: o.cache, log: l}, images: images, docker: docker}
	phases := e.phases()
	if len(o.only) > 0 {
		var picked []phase
		for _, n := range o.only {
			i := slices.IndexFunc(phases, func(p phase) bool { return p.name == n })
			if i < 0 {
				return fmt.Errorf("--only %s: no such phase", n)
			}
			picked = append(picked, phases[i])
		}
		phases = picked
	}
	for _, p := range phases {
		l.begin(p.name)
		if err := p.run(ctx); err != nil {
			return err
		}
	}
	l.end()
	l.V(0).Infof("ready: SRIOV_LANE_TEST_ASSETS=%s", assets)
	return nil
}
