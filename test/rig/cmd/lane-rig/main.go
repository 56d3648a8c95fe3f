package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/test/rig"
	"github.com/sriov-lane/sriov-lane/test/rig/sysfs"
	"github.com/sriov-lane/sriov-lane/test/testutil"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "lane-rig:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "lane-rig",
		Short:         "Stand-in SR-IOV hardware for sriov-lane tests",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newUp(), newDown(), newEmulate(), newPushImage(), newEnv(), newSweep())
	return root
}

// newSweep is make test's first and last step (hack/test-tiers.sh): what
// killed test runs left under the names of test slots nobody holds.
func newSweep() *cobra.Command {
	return &cobra.Command{
		Use:   "sweep",
		Short: "Remove what killed test runs left under the names of free test slots (testutil.Sweep)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			removed, err := testutil.Sweep(cmd.Context())
			for _, r := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", r)
			}
			return err
		},
	}
}

func absDir(dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("--dir is required")
	}
	return filepath.Abs(dir)
}

func newUp() *cobra.Command {
	var dir, prefix, mirror, vfDriver string
	var pfs int
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create stand-in PFs, the fake sysfs tree and start the emulator",
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := absDir(dir)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding lane-rig binary: %w", err)
			}
			s, err := rig.Up(cmd.Context(), rig.Options{
				Dir: d, PFs: pfs, Prefix: prefix,
				EmulatorCommand: []string{self, "emulate", "--dir", d},
				ImageMirror:     mirror,
				VFDriver:        vfDriver,
			})
			if err != nil {
				return err
			}
			for _, pf := range s.PFs {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\n", pf.Name, pf.MAC, pf.BDF)
			}
			nic, err := sysfs.NICForVFDriver(s.VFDriver)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sysfs %s (%s: PFs on %s, VFs on %s), emulator pid %d, lane config %s\n",
				s.SysfsRoot, nic.Model, nic.PFDriver, nic.VFDriver, s.EmulatorPID, filepath.Join(d, rig.LaneFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the rig's files (sys/, dev/vfio, rig.json, lane.yaml)")
	cmd.Flags().IntVar(&pfs, "pfs", 2, "number of stand-in PFs")
	cmd.Flags().StringVar(&prefix, "prefix", rig.DefaultPrefix, "name prefix of the PF links")
	cmd.Flags().StringVar(&vfDriver, "vf-driver", sysfs.NICs[0].VFDriver, "kernel driver of the fake VFs, which picks the NIC the fake kernel stands in for: "+knownNICs()+
		"; not the lane's vfDriver (netdevice VFs stay on this driver)")
	cmd.Flags().StringVar(&mirror, "image-mirror", "", "imageRegistryMirror for the rig's lane config (make test-env serves the component images at the address in $SRIOV_LANE_TEST_ASSETS/rig-image-mirror)")
	return cmd
}

// knownNICs lists the --vf-driver values with the NIC each stands for.
func knownNICs() string {
	var out []string
	for _, n := range sysfs.NICs {
		out = append(out, fmt.Sprintf("%s (%s, PF on %s)", n.VFDriver, n.Model, n.PFDriver))
	}
	return strings.Join(out, ", ")
}

func newDown() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the emulator and delete the rig's links, netns and files",
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := absDir(dir)
			if err != nil {
				return err
			}
			return rig.Down(d)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the rig's directory")
	return cmd
}

func newEmulate() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "emulate",
		Short:  "Serve a rig's fake sysfs and /dev/vfio in the foreground (started by up)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := absDir(dir)
			if err != nil {
				return err
			}
			s, err := rig.ReadState(d)
			if err != nil {
				return err
			}
			if s == nil {
				return fmt.Errorf("no rig in %s", d)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
			srv, err := sysfs.Serve(s.ServeConfig(d, logger))
			if err != nil {
				return err
			}
			if err := rig.WritePIDFile(d); err != nil {
				logger.Printf("writing pid file: %v", err)
			}
			logger.Printf("serving %s and %s", s.SysfsRoot, s.VFIODir)
			<-ctx.Done()
			err = srv.Close()
			logger.Printf("emulator stopped: %v", err)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the rig's directory")
	return cmd
}
