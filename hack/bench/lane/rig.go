package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

// Names the bench owns; nothing else is ever deleted.
const (
	laneName     = "bench-lane"
	baselineName = "bench-k3d"
)

// bench is one rig with its in-process kernel emulator, the lane config
// `lane-rig up` writes for it, and a copy of it for the k3d baseline.
type bench struct {
	o        options
	tmp      string
	rigDir   string
	state    *rig.State
	lane     *config.Lane
	baseline *config.Lane
	// laneOnDisk is lane with server.datastoreOnTmpfs false.
	laneOnDisk *config.Lane
	// engines are the bench run's clients of the engine, as pkg/cmd's
	// run has; docker is the lane's.
	engines provider.Engines
	docker  *client.Client

	stopEmulator func() error
}

// newBench returns a bench even on error, so its close undoes what was made.
func newBench(ctx context.Context, o options) (*bench, error) {
	b := &bench{o: o}
	if os.Geteuid() != 0 {
		return b, errors.New("needs root (netlink moves, sysfs, Docker)")
	}
	if err := checkNetnsName(o.prefix + "-peers"); err != nil {
		return b, err
	}
	tmp, err := os.MkdirTemp("", "bl-bench-")
	if err != nil {
		return b, err
	}
	b.tmp, b.rigDir = tmp, filepath.Join(tmp, "rig")
	// k3d leaves a temp hosts file per node per create: keep them in here.
	k3dTmp := filepath.Join(tmp, "k3d")
	if err := os.Mkdir(k3dTmp, 0o700); err != nil {
		return b, err
	}
	os.Setenv("TMPDIR", k3dTmp)
	// The lane's component images come from make test-env's rig registry,
	// as in the tests: up then runs to every component pod Ready.
	mirror := testutil.RigImageMirror()
	if mirror == "" {
		return b, errors.New("no rig image registry: run make test-env (make bench does) with SRIOV_LANE_TEST_ASSETS set")
	}
	st, err := rig.Up(ctx, rig.Options{Dir: b.rigDir, PFs: o.pfs, Prefix: o.prefix, ImageMirror: mirror})
	if err != nil {
		return b, fmt.Errorf("rig up: %w", err)
	}
	b.state = st
	if err := b.startEmulator(); err != nil {
		return b, err
	}
	// Exactly what `sriov-lane up --config <rig>/lane.yaml` resolves.
	l, err := config.Load(config.Source{File: filepath.Join(b.rigDir, rig.LaneFile)})
	if err != nil {
		return b, err
	}
	l.Name, l.APIPort = laneName, o.port+1
	l.Server.DatastoreOnTmpfs = ptrTo(true)
	b.lane = l
	onDisk := *l
	onDisk.Server.DatastoreOnTmpfs = ptrTo(false)
	b.laneOnDisk = &onDisk
	base := *l
	base.Name, base.APIPort = baselineName, o.port
	b.baseline = &base
	if b.docker, err = b.engines.Client(l.ContainerEngine); err != nil {
		return b, err
	}
	return b, nil
}

func (b *bench) startEmulator() error {
	logf, err := os.Create(filepath.Join(b.tmp, "emulator.log"))
	if err != nil {
		return err
	}
	srv, err := sysfs.Serve(b.state.ServeConfig(b.rigDir, log.New(logf, "", log.Lmicroseconds)))
	if err != nil {
		logf.Close()
		return fmt.Errorf("serving the fake sysfs: %w", err)
	}
	b.stopEmulator = func() error {
		err := srv.Close()
		logf.Close()
		return err
	}
	return nil
}

func (b *bench) describe() string {
	l := b.lane
	return fmt.Sprintf("%d iterations; %d agents x %d PF, %d VFs per PF (%s); rig links %s0..; k3s image %s",
		b.o.iters, l.Agents, l.PFsPerNode, l.VFsPerPF, l.VFDriver, b.o.prefix, l.K3sImage)
}

// close undoes everything in dependency order: the lane (its PFs need the
// emulator to drop their VFs), the baseline cluster, the emulator, the rig.
func (b *bench) close(ctx context.Context) error {
	var errs []error
	if b.lane != nil {
		if _, err := lane.Down(ctx, b.lane, lane.DownOptions{Engines: &b.engines, Out: logOut(b.o.verbose), Force: true}); err != nil {
			errs = append(errs, fmt.Errorf("lane %s down: %w", laneName, err))
		}
	}
	if b.baseline != nil && b.docker != nil {
		if err := provider.NewWithClient(b.docker).Delete(ctx, baselineName); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(b.baseline.Dir().Path()); err != nil {
			errs = append(errs, err)
		}
	}
	if b.stopEmulator != nil {
		if err := b.stopEmulator(); err != nil {
			errs = append(errs, fmt.Errorf("emulator: %w", err))
		}
	}
	if b.rigDir != "" {
		if err := rig.Down(b.rigDir); err != nil {
			errs = append(errs, fmt.Errorf("rig down: %w", err))
		}
	}
	b.engines.Close()
	if b.tmp != "" && len(errs) == 0 {
		// Kept on failure: rig.json lets `lane-rig down --dir` finish the job.
		os.RemoveAll(b.tmp)
	} else if b.tmp != "" {
		errs = append(errs, fmt.Errorf("kept %s for `lane-rig down --dir %s`", b.tmp, b.rigDir))
	}
	return errors.Join(errs...)
}

// checkNetnsName refuses a peers netns name whose /run/netns file exists
// but is no namespace: the rig would take it for its netns. That happens
// when a netns mounted before the first `ip netns add` after boot (which
// rbinds /run/netns onto itself) is deleted: the original mount is left
// shadowed and the name cannot be removed until reboot.
func checkNetnsName(name string) error {
	p := filepath.Join("/run/netns", name)
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return nil // absent: the rig creates it
	}
	if st.Type == unix.NSFS_MAGIC {
		return nil // a live netns: a leftover rig of this prefix, which rig.Up reuses
	}
	return fmt.Errorf("%s exists but is not a network namespace (a stale, shadowed mount; cleared by reboot): pick another rig prefix, e.g. LANE_BENCH_ARGS='-prefix bl-b' make bench", p)
}

func ptrTo[T any](v T) *T { return &v }
