package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	k3dlog "github.com/k3d-io/k3d/v5/pkg/logger"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/sriov-lane/sriov-lane/pkg/config"
	"github.com/sriov-lane/sriov-lane/pkg/log"
	"github.com/sriov-lane/sriov-lane/pkg/provider"
)

// IOStreams are the command's standard streams (tests pass buffers).
type IOStreams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Exit codes: 2 for bad input (nothing on the host changed), 1 for runtime
// failures.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// usageError marks bad command-line input.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// usagef returns a usage error (exit 2).
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// outputFlag adds -o/--output to c, taking one of formats with the first
// the default, and refuses any other before c runs, so every command
// answers an unknown format with the same usage error.
func outputFlag(c *cobra.Command, output *string, formats ...string) {
	list := strings.Join(formats, " or ")
	c.Flags().StringVarP(output, "output", "o", formats[0], "output format: "+list)
	c.PreRunE = func(*cobra.Command, []string) error {
		if !slices.Contains(formats, *output) {
			return usagef("unknown output format %q: use %s", *output, list)
		}
		return nil
	}
}

// ExitCode maps an error to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var u usageError
	if errors.As(err, &u) || config.IsInvalid(err) {
		return ExitUsage
	}
	return ExitFailure
}

// globals are options every command shares, and the run's one client
// per container engine. They live on the root command's instance, not in
// package state, so tests can run commands side by side.
type globals struct {
	verbose bool
	streams IOStreams
	// engines are the run's clients, one per engine, handed to every lane
	// call and closed when the run ends (close).
	engines provider.Engines
	// note is what the first Ctrl-C says (interruptNote); a command whose
	// interruption does more than stop sets its own.
	note atomic.Pointer[string]
}

// interruptNote is what the first Ctrl-C of the run says.
func (g *globals) interruptNote() string {
	if n := g.note.Load(); n != nil {
		return *n
	}
	return interruptedNote
}

// log is the run's logger: warnings, errors and -v detail, on stderr like
// every step line (results alone go to stdout).
func (g *globals) log() log.Logger { return log.NewPrinter(g.streams.Err, g.verbose) }

func (g *globals) close() { g.engines.Close() }

// NewRoot builds the command tree.
func NewRoot(streams IOStreams) *cobra.Command {
	root, _ := newRoot(streams)
	return root
}

func newRoot(streams IOStreams) (*cobra.Command, *globals) {
	g := &globals{streams: streams}
	root := &cobra.Command{
		Use:   "sriov-lane",
		Short: "Local Kubernetes test lanes with real SR-IOV NICs",
		Long: `sriov-lane brings up a k3d cluster (1 k3s server, N agents), moves SR-IOV physical
functions from this host into the agents, creates VFs, deploys Multus, sriov-cni, the
SR-IOV device plugin and a CNI, and waits until every agent advertises its VFs.
'sriov-lane down' gives every PF back to the network namespace it came from.
Every command that changes the host runs as root.`,
		Example: `  sriov-lane check                 # is this host ready?
  sriov-lane up                    # 1 server + 2 agents, 1 PF and 6 VFs each
  sriov-lane up --config lane.yaml
  sriov-lane status
  sriov-lane down`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			// k3d logs through its own logrus logger; its info lines would
			// interleave with our one-line-per-step progress. Keep them for -v.
			k3dlog.Log().SetOutput(streams.Err)
			if g.verbose {
				k3dlog.Log().SetLevel(logrus.InfoLevel)
			} else {
				k3dlog.Log().SetLevel(logrus.WarnLevel)
			}
		},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	root.SetIn(streams.In)
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "show detail for every step")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())}
	})
	root.AddCommand(
		newVersionCmd(g),
		newPlanCmd(g),
		newCheckCmd(g),
		newUpCmd(g),
		newDownCmd(g),
		newStatusCmd(g),
		newRepairCmd(g),
		newResetCmd(g),
		newVerifyCmd(g),
		newLoadCmd(g),
		newExportCmd(g),
		newFleetCmd(g),
	)
	return root, g
}

// Main runs the CLI and returns the exit code. The first SIGINT or SIGTERM
// cancels the context, so `up` undoes what it did before exiting; a second
// quits at once (onInterrupt).
func Main(args []string, streams IOStreams) int {
	root, g := newRoot(streams)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, stop := onInterrupt(context.Background(), sigs, streams.Err, g.interruptNote, os.Exit)
	defer stop()
	defer g.close()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(streams.Err, "error: %v\n", err)
	}
	return ExitCode(err)
}

// Notes the first Ctrl-C prints: what the command does now that it was
// interrupted.
const (
	interruptedNote   = "interrupted: stopping; press Ctrl-C again to quit now"
	interruptedUpNote = "interrupted: undoing what up made; press Ctrl-C again to quit now, 'sriov-lane down' finishes the job"
)

// onInterrupt cancels the returned context at the first signal on sigs,
// telling errOut what happens now (note), and calls exit at the second:
// a long undo need not be waited for, since the journal keeps what is left
// for down to finish. The exit code is 128 + the signal's number, as a
// shell reports a process a signal ended.
func onInterrupt(parent context.Context, sigs <-chan os.Signal, errOut io.Writer, note func() string, exit func(int)) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		fmt.Fprintln(errOut, note())
		cancel()
		select {
		case sig := <-sigs:
			fmt.Fprintf(errOut, "%s again: quitting now\n", sig)
			code := 128 + int(syscall.SIGINT)
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			exit(code)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(done); cancel() }) }
}

// usageArgs makes cobra's argument checks usage errors (exit 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

var noArgs = usageArgs(cobra.NoArgs)
