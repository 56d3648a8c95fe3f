// Command sriovdp stands in for the SR-IOV network device plugin
// (ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin), whose Go
// module the proxy refuses. It speaks the kubelet device plugin API
// (k8s.io/kubelet pkg/apis/deviceplugin/v1beta1@v0.37.2): one gRPC server
// per resource of /etc/pcidp/config.json, registered with kubelet,
// ListAndWatch of the VFs the resource's selectors pick in sysfs, and
// Allocate answering with the VFIO device specs and the PCIDEVICE_*
// variable the real plugin sets; it writes device info where the real one
// does (/var/run/k8s.cni.cncf.io/devinfo/dp) for sriov-cni and Multus.
// Only netDevice resources of VFs are supported; anything else is refused.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

type options struct {
	configFile     string
	resourcePrefix string
	logDir         string
	logLevel       int
	sysfsRoot      string
	pluginDir      string
	devInfoDir     string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "sriovdp (stand-in): %v\n", err)
		os.Exit(1)
	}
}

// parseFlags takes the upstream plugin's flags (cmd/sriovdp/main.go of
// sriov-network-device-plugin v3.11.0: --config-file, --resource-prefix,
// --log-dir, --log-level, --use-cdi); unknown flags are errors, as with
// upstream's flag package. --sysfs-root, --plugin-dir and --devinfo-dir
// exist for the stand-in's own tests.
func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("sriovdp", flag.ContinueOnError)
	var o options
	var useCDI bool
	fs.StringVar(&o.configFile, "config-file", "/etc/pcidp/config.json", "JSON device pool config file location")
	fs.StringVar(&o.resourcePrefix, "resource-prefix", "intel.com", "resource name prefix used for K8s extended resource")
	fs.StringVar(&o.logDir, "log-dir", "", "log directory (the stand-in logs to stderr only)")
	fs.IntVar(&o.logLevel, "log-level", 10, "log level")
	fs.BoolVar(&useCDI, "use-cdi", false, "use CDI (not supported by the stand-in)")
	fs.StringVar(&o.sysfsRoot, "sysfs-root", "/sys", "where sysfs is (stand-in)")
	fs.StringVar(&o.pluginDir, "plugin-dir", "/var/lib/kubelet/device-plugins", "kubelet's device plugin directory (stand-in)")
	fs.StringVar(&o.devInfoDir, "devinfo-dir", "/var/run/k8s.cni.cncf.io/devinfo/dp", "device info directory (stand-in)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if useCDI {
		return o, fmt.Errorf("--use-cdi is not supported by the stand-in device plugin")
	}
	return o, nil
}
