// Command sriovdp stands in for the SR-IOV network device plugin
// (ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.11.0), whose
// Go module the proxy refuses. It does what the plugin at v3.11.0 does for
// netDevice pools of VFs, read in k8snetworkplumbingwg/sriov-network-device-plugin
// at that tag (cited by path in the code):
//
//   - reads /etc/pcidp/config.json, picks each pool's devices once at start
//     from sysfs with every netDevice selector, and leaves out pools with
//     none;
//   - serves one kubelet device plugin endpoint per pool (k8s.io/kubelet
//     deviceplugin/v1beta1), registered through kubelet's plugin watcher
//     when /var/lib/kubelet/plugins_registry exists (the product's pod
//     mounts it), else by a Register call on kubelet.sock;
//   - answers Allocate with PCIDEVICE_<prefix>_<name> and its _INFO, the
//     VFIO device specs of vfio-pci devices, and device info files in
//     /var/run/k8s.cni.cncf.io/devinfo/dp for Multus and sriov-cni.
//
// Two things are the stand-in's own. sysfs is the rig's fake one, found by
// test/standin/rigsysfs (the product mounts no /sys into the pod). And the
// VFIO device specs name character devices the stand-in makes (see
// resourceServer.Allocate), because the rig has no real ones. It refuses
// what it does not implement: accelerator and auxNetDevice pools,
// needVhostNet and --use-cdi. It logs to stderr only.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
)

// options are the plugin's settings. The paths are upstream's constants;
// tests point them elsewhere.
type options struct {
	configFile     string
	resourcePrefix string
	logDir         string
	logLevel       string
	useCDI         bool

	// sysfsRoot is where sysfs is; "" finds it with rigsysfs.Find.
	sysfsRoot string
	// pluginDir is kubelet's device plugin directory
	// (pkg/types/types.go DeprecatedSockDir), registryDir its plugin
	// watcher directory (SockDir).
	pluginDir, registryDir string
	// devInfoDir is network-attachment-definition-client's device info
	// directory for device plugins.
	devInfoDir string
	// vfioDevDir holds the stand-in's VFIO character devices; devNull is
	// the device whose numbers they take.
	vfioDevDir, devNull string
}

func defaultOptions() options {
	return options{
		configFile:     "/etc/pcidp/config.json",
		resourcePrefix: "intel.com",
		logLevel:       "10",
		pluginDir:      "/var/lib/kubelet/device-plugins",
		registryDir:    "/var/lib/kubelet/plugins_registry",
		devInfoDir:     "/var/run/k8s.cni.cncf.io/devinfo/dp",
		vfioDevDir:     "/var/lib/kubelet/device-plugins/sriov-lane-standin/vfio",
		devNull:        "/dev/null",
	}
}

var errHelp = errors.New("help requested")

// parseArgs takes the arguments as the upstream image's entrypoint does
// (images/entrypoint.sh: PARAM is what precedes the first '=', VALUE the
// field after it; an unknown PARAM is an error and exit 1) and applies
// them as it passes them on to sriovdp (cmd/sriovdp/main.go flags; an
// empty --resource-prefix or --config-file keeps the default).
func parseArgs(args []string) (options, error) {
	o := defaultOptions()
	for _, a := range args {
		fields := strings.Split(a, "=")
		param, value := fields[0], ""
		if len(fields) > 1 {
			value = fields[1]
		}
		switch param {
		case "-h", "--help":
			return o, errHelp
		case "--log-dir":
			o.logDir = value
		case "--log-level":
			o.logLevel = value
		case "--resource-prefix":
			if value != "" {
				o.resourcePrefix = value
			}
		case "--config-file":
			if value != "" {
				o.configFile = value
			}
		case "--use-cdi":
			o.useCDI = true
		default:
			return o, fmt.Errorf("ERROR: unknown parameter %q", param)
		}
	}
	if o.useCDI {
		return o, fmt.Errorf("--use-cdi is not supported by the stand-in device plugin")
	}
	return o, nil
}

const usage = `This is an entrypoint script for SR-IOV Network Device Plugin (stand-in)

./entrypoint.sh
	-h --help
	--log-dir=
	--log-level=10
	--resource-prefix=
	--config-file=
	--use-cdi
`

func main() {
	log.SetPrefix("sriovdp (stand-in): ")
	o, err := parseArgs(os.Args[1:])
	if errors.Is(err, errHelp) {
		fmt.Print(usage)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprint(os.Stderr, usage)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer stop()
	if err := run(ctx, o, nil); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// run serves until ctx ends. ready, when not nil, receives the servers
// once they are started (tests).
func run(ctx context.Context, o options, ready func([]*resourceServer)) error {
	warnf := func(f string, a ...any) { log.Printf(f, a...) }
	root := o.sysfsRoot
	if root == "" {
		var err error
		if root, err = rigsysfs.Find(); err != nil {
			return err
		}
	}
	log.Printf("sysfs at %s", root)
	raw, err := os.ReadFile(o.configFile)
	if err != nil {
		return fmt.Errorf("error reading file %s, %v", o.configFile, err)
	}
	list, err := readConfig(raw, warnf)
	if err != nil {
		return fmt.Errorf("error getting resources from file: %w", err)
	}
	if len(list) == 0 {
		// Upstream logs this and returns from main: exit status 0.
		log.Print("no resource configuration; exiting")
		return nil
	}
	if err := validConfigs(list, o.resourcePrefix); err != nil {
		return fmt.Errorf("Exiting.. one or more invalid configuration(s) given: %w", err)
	}
	pools, err := selectPools(root, list, warnf)
	if err != nil {
		return err
	}
	// utils.DetectPluginWatchMode: the plugins_registry directory exists.
	_, statErr := os.Stat(o.registryDir)
	pluginWatch := statErr == nil
	if pluginWatch {
		log.Print("Using Kubelet Plugin Registry Mode")
	} else {
		log.Print("Using Deprecated Device Plugin Registry Path")
	}
	var servers []*resourceServer
	defer func() {
		for _, rs := range servers {
			rs.stop()
		}
	}()
	for _, rc := range list {
		devs, ok := pools[rc]
		if !ok {
			continue
		}
		rs := newResourceServer(o, rc, devs, pluginWatch)
		ids := make([]string, 0, len(devs))
		for _, d := range devs {
			ids = append(ids, d.bdf)
		}
		sort.Strings(ids)
		log.Printf("%s: %d devices: %s", rs.resourceName(), len(ids), strings.Join(ids, " "))
		if err := rs.start(ctx); err != nil {
			return err
		}
		servers = append(servers, rs)
		if !pluginWatch {
			go rs.watch(ctx)
		}
	}
	if ready != nil {
		ready(servers)
	}
	<-ctx.Done()
	return nil
}
