package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
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
	// logRoot is where the entrypoint makes --log-dir (/var/log).
	logRoot string
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
	// net answers what upstream asks netlink; nil is netlink itself.
	net netView
}

func defaultOptions() options {
	return options{
		configFile:     "/etc/pcidp/config.json",
		resourcePrefix: "intel.com",
		logLevel:       "10",
		logRoot:        "/var/log",
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
// field after it; an unknown PARAM is an error and exit 1; --log-dir is
// made under /var/log) and applies them as it passes them on to sriovdp
// (cmd/sriovdp/main.go flags; an empty --resource-prefix or --config-file
// is not passed, which keeps the default). --log-level becomes glog's -v,
// an integer (golang/glog glog_flags.go@v1.2.5 Level.Set: strconv.Atoi);
// the flag package ends the process with status 2 on anything else,
// including an empty value, after which -v takes the next word of the
// command line.
func parseArgs(args []string, logRoot string) (options, error) {
	o := defaultOptions()
	o.logRoot = logRoot
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
			return o, &exit{code: 1, err: fmt.Errorf("ERROR: unknown parameter %q", param)}
		}
	}
	if o.logDir != "" {
		if err := os.MkdirAll(filepath.Join(o.logRoot, o.logDir), 0o755); err != nil {
			return o, &exit{code: 1, err: fmt.Errorf("mkdir: %w", err)}
		}
	}
	if _, err := strconv.Atoi(o.logLevel); err != nil {
		return o, &exit{code: 2, err: fmt.Errorf("invalid value %q for flag -v: parse error", o.logLevel)}
	}
	if o.useCDI {
		return o, &exit{code: 1, err: fmt.Errorf("--use-cdi is not supported by the stand-in device plugin")}
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
	o, err := parseArgs(os.Args[1:], "/var/log")
	if errors.Is(err, errHelp) {
		fmt.Print(usage)
		return
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
		err = run(ctx, o, nil)
		stop()
	}
	if err != nil {
		log.Print(err)
		os.Exit(exitCode(err))
	}
}

// exitCode is the status err ends the process with (see exit); an error
// of the stand-in's own is 1.
func exitCode(err error) int {
	var e *exit
	if errors.As(err, &e) {
		return e.code
	}
	return 1
}

// run serves until ctx ends, or returns how the process ends. ready, when
// not nil, receives the servers once they are started (tests).
func run(ctx context.Context, o options, ready func([]*resourceServer)) error {
	warnf := func(f string, a ...any) { log.Printf(f, a...) }
	nv := o.net
	if nv == nil {
		nv = hostNet{}
	}
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
		return returned("error getting resources from file error reading file %s, %v", o.configFile, err)
	}
	list, err := readConfig(raw, warnf)
	var e *exit
	if errors.As(err, &e) {
		return err
	}
	if err != nil {
		return returned("error getting resources from file %v", err)
	}
	if len(list) == 0 {
		return returned("no resource configuration; exiting")
	}
	if err := validConfigs(list, o.resourcePrefix); err != nil {
		return err
	}
	pools := selectPools(root, list, nv, warnf)
	if err := uioRefused(pools); err != nil {
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
	// A server whose restart fails ends the process (resources/server.go
	// Watch: glog.Fatalf).
	fatal := make(chan error, len(list))
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
			go func() {
				if err := rs.watch(ctx); err != nil {
					fatal <- err
				}
			}()
		}
	}
	if ready != nil {
		ready(servers)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-fatal:
		return err
	}
}
