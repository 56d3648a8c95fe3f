package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/lane"
	"github.com/sriov-lane/sriov-lane/pkg/statedir"
)

// laneFlags selects and configures the lane a command acts on: --config F,
// --name N and every lane setting as a flag (precedence flag > env > file >
// default, see pkg/config).
type laneFlags struct {
	file     string
	name     string
	settings *config.Flags
	// g gives the logger a saved config that cannot be read is reported to.
	g *globals
}

// addLaneFlags registers the lane-selecting flags; settings=false registers
// only --config and --name (for commands that act on an existing lane).
func addLaneFlags(g *globals, c *cobra.Command, settings bool) *laneFlags {
	lf := &laneFlags{g: g}
	c.Flags().StringVarP(&lf.file, "config", "c", "", "lane config file (apiVersion sriov-lane.io/v1alpha1, kind Lane)")
	c.Flags().StringVarP(&lf.name, "name", "n", "", "lane name (env SRIOV_LANE_NAME, CLUSTER_NAME; default sriov)")
	if settings {
		lf.settings = config.AddFlags(c.Flags(), "name")
	}
	return lf
}

// loadSaved resolves the lane, then takes the config `up` saved for it, so
// commands acting on an existing lane see exactly what up made.
func (lf *laneFlags) loadSaved() (*config.Lane, error) {
	l, err := lf.load()
	if err != nil {
		return nil, err
	}
	return lane.ResolveSaved(l, lf.g.log())
}

// load resolves the lane config from flags, environment and file.
func (lf *laneFlags) load() (*config.Lane, error) {
	return config.Load(config.Source{File: lf.file, Getenv: os.LookupEnv, Flags: lf.settings, Name: lf.name})
}

// eachLane runs f on the saved config of the selected lane, or with all on
// every lane of the state dir, going on past failures. With all and no lane
// it says there is nothing to do; the error names every lane's failure,
// as "N lane(s) <notDone>: ...".
func (lf *laneFlags) eachLane(all bool, notDone string, f func(*config.Lane) error) error {
	l, err := lf.load()
	if err != nil {
		return err
	}
	names := []string{l.Name}
	if all {
		if lf.name != "" {
			return usagef("--all and --name exclude each other")
		}
		if names, err = statedir.Dir(l.StateDir).Lanes(); err != nil {
			return err
		}
	}
	var failed []error
	for _, n := range names {
		ln := *l
		ln.Name = n
		saved, err := lane.ResolveSaved(&ln, lf.g.log())
		if err == nil {
			err = f(saved)
		}
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(lf.g.streams.Out, "no lanes: nothing to do")
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d lane(s) %s: %v", len(failed), notDone, failed)
	}
	return nil
}
