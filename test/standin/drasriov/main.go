package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metadatav1alpha1 "k8s.io/dynamic-resource-allocation/api/metadata/v1alpha1"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/sriov-lane/sriov-lane/test/standin/rigsysfs"
)

// options are upstream's flags, each also read from its environment
// variable (cmd/dra-driver-sriov/main.go@14490e9d438b), with its defaults.
type options struct {
	nodeName, cdiRoot, registrarDir, pluginsDir, ifPrefix, namespace, mode string
	enableDeviceMetadata                                                   bool
	// sysRoot is the rig's sysfs (rigsysfs), the stand-in's own.
	sysRoot string
}

func (o options) pluginDataDir() string { return filepath.Join(o.pluginsDir, driverName) }

// parseOptions is the driver's CLI: flags and their environment
// variables; positional arguments are refused ("arguments not
// supported"), and so is a configuration mode other than STANDALONE or
// MULTUS (pkg/devicestate/state.go@14490e9d438b). MULTUS, which the lane
// never sets, the stand-in refuses too.
func parseOptions(args []string, getenv func(string) string) (options, error) {
	fs := flag.NewFlagSet("dra-driver-sriov", flag.ContinueOnError)
	str := func(name, env, def string) *string {
		if v := getenv(env); v != "" {
			def = v
		}
		return fs.String(name, def, "")
	}
	o := options{}
	nodeName := str("node-name", "NODE_NAME", "")
	cdiRoot := str("cdi-root", "CDI_ROOT", "/var/run/cdi")
	reg := str("kubelet-registrar-directory-path", "KUBELET_REGISTRAR_DIRECTORY_PATH", kubeletplugin.KubeletRegistryDir)
	plugins := str("kubelet-plugins-directory-path", "KUBELET_PLUGINS_DIRECTORY_PATH", kubeletplugin.KubeletPluginsDir)
	prefix := str("default-interface-prefix", "DEFAULT_INTERFACE_PREFIX", "vfnet")
	ns := str("namespace", "NAMESPACE", "dra-driver-sriov")
	mode := str("configuration-mode", "CONFIGURATION_MODE", "STANDALONE")
	meta := str("enable-device-metadata", "ENABLE_DEVICE_METADATA", "false")
	// Logging flags of upstream's (klog's -v and friends) are taken and
	// left alone: the stand-in logs with the standard logger.
	_ = str("v", "V", "")
	_ = str("log-format", "LOG_FORMAT", "")
	_ = str("alsologtostderr", "ALSOLOGTOSTDERR", "")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("arguments not supported: %v", fs.Args())
	}
	if *nodeName == "" {
		return o, errors.New(`Required flag "node-name" not set`) //nolint:staticcheck // urfave/cli's words, as upstream exits with them
	}
	md, err := strconv.ParseBool(*meta)
	if err != nil {
		return o, fmt.Errorf("invalid value %q for flag -enable-device-metadata: %v", *meta, err)
	}
	switch *mode {
	case "", "STANDALONE":
	case "MULTUS":
		return o, fmt.Errorf("stand-in: configuration mode MULTUS is not implemented")
	default:
		return o, fmt.Errorf("unsupported configuration mode %q, expected %q or %q", *mode, "STANDALONE", "MULTUS")
	}
	return options{nodeName: *nodeName, cdiRoot: *cdiRoot, registrarDir: *reg, pluginsDir: *plugins, ifPrefix: *prefix,
		namespace: *ns, mode: *mode, enableDeviceMetadata: md}, nil
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

// registrationTimeout is upstream's wait for kubelet to register the
// plugin (pkg/driver/driver.go@14490e9d438b waitForRegistration).
const registrationTimeout = 30 * time.Second

// run is RunPlugin: the plugin data and CDI dirs, discovery, the kubelet
// plugin registered and serving, the policies watched and published, NRI
// connected; then it serves until a signal or NRI's connection closes.
func run(ctx context.Context, args []string, getenv func(string) string) error {
	o, err := parseOptions(args, getenv)
	if err != nil {
		return err
	}
	if o.sysRoot, err = rigsysfs.Find(); err != nil {
		return err
	}
	if err := os.MkdirAll(o.pluginDataDir(), 0o750); err != nil {
		return err
	}
	switch fi, err := os.Stat(o.cdiRoot); {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(o.cdiRoot, 0o750); err != nil {
			return err
		}
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("path for cdi file generation is not a directory: %q", o.cdiRoot)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("create client: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %v", err)
	}
	cdiCache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(o.cdiRoot))
	if err != nil {
		return fmt.Errorf("unable to create CDI handler: unable to create a new CDI cache: %w", err)
	}
	devs, err := discover(o.sysRoot)
	if err != nil {
		return err
	}
	log.Printf("discovered %d VFs in %s", len(devs), o.sysRoot)
	p := &plugin{o: o, cs: cs, dyn: dyn, devs: devs, cdi: cdiCache}
	if err := p.loadCheckpoint(); err != nil {
		return fmt.Errorf("reading checkpoint: %w", err)
	}

	opts := []kubeletplugin.Option{
		kubeletplugin.KubeClient(cs),
		kubeletplugin.NodeName(o.nodeName),
		kubeletplugin.DriverName(driverName),
		kubeletplugin.RegistrarDirectoryPath(o.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(o.pluginDataDir()),
		// Upstream is built on the helper of v0.36.1, which has no
		// health service; the stand-in's v0.37.2 turns it off to match.
		kubeletplugin.HealthService(false),
	}
	if o.enableDeviceMetadata {
		// Upstream's metadata version, v1alpha1, the latest of its helper
		// (pkg/driver/driver.go@14490e9d438b metadataVersionsOption), and
		// v1beta1, which the stand-in's helper (v0.37.2) requires be
		// enabled as its latest.
		versions := []schema.GroupVersion{metadatav1alpha1.SchemeGroupVersion, metadatav1beta1.SchemeGroupVersion}
		opts = append(opts, kubeletplugin.EnableDeviceMetadata(true, versions), kubeletplugin.CDIDirectory(o.cdiRoot))
	}
	helper, err := kubeletplugin.Start(ctx, p, opts...)
	if err != nil {
		return fmt.Errorf("failed to start DRA driver: %w", err)
	}
	defer shutdown(helper, o)
	if err := waitRegistered(ctx, helper); err != nil {
		return fmt.Errorf("failed to start DRA driver: %w", err)
	}
	publish := func(devices []resourceapi.Device) error {
		return helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
			o.nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
		}})
	}
	if err := publish(nil); err != nil {
		return fmt.Errorf("failed to start DRA driver: failed to publish resources: %w", err)
	}
	if err := watchPolicies(ctx, dyn, cs, o, devs, publish, func(err error) { cancel(err) }); err != nil {
		return err
	}
	nri, err := startNRI(ctx, p, func() { cancel(fmt.Errorf("NRI plugin closed")) })
	if err != nil {
		return err
	}
	defer nri.Stop()
	log.Printf("NRI plugin started")
	<-ctx.Done()
	stop()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Printf("error from context: %v", err)
	}
	return nil
}

func waitRegistered(ctx context.Context, h *kubeletplugin.Helper) error {
	deadline := time.After(registrationTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("timeout waiting for plugin registration")
		case <-tick.C:
			s := h.RegistrationStatus()
			if s != nil && s.PluginRegistered {
				log.Printf("plugin registration completed successfully")
				return nil
			}
			if s != nil && s.Error != "" {
				return fmt.Errorf("plugin registration failed: %s", s.Error)
			}
		}
	}
}

// shutdown is Driver.Shutdown: the helper stopped, then both sockets
// removed (the TODO there about kubernetes/kubernetes#133934).
func shutdown(h *kubeletplugin.Helper, o options) {
	h.Stop()
	for _, s := range []string{filepath.Join(o.registrarDir, driverName+"-reg.sock"), filepath.Join(o.pluginDataDir(), "dra.sock")} {
		if err := os.Remove(s); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Printf("error removing socket file: %v", err)
		}
	}
}
