package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	pvController "sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
)

// Flags, their environment variables and defaults (main.go@v0.0.36).
const (
	flagConfigFile           = "config"
	flagProvisionerName      = "provisioner-name"
	flagNamespace            = "namespace"
	flagHelperImage          = "helper-image"
	flagServiceAccountName   = "service-account-name"
	flagKubeconfig           = "kubeconfig"
	flagConfigMapName        = "configmap-name"
	flagHelperPodFile        = "helper-pod-file"
	flagWorkerThreads        = "worker-threads"
	flagProvisioningRetries  = "provisioning-retry-count"
	flagDeletionRetries      = "deletion-retry-count"
	flagAllowUnsafeHelperPod = "allow-unsafe-helper-pod-template"
	flagKubeClientBurst      = "kube-client-burst"
	flagKubeClientQPS        = "kube-client-qps"

	envConfigMountPath = "CONFIG_MOUNT_PATH"

	defaultConfigFileKey    = "config.json"
	defaultHelperPodFileKey = "helperPod.yaml"

	// version: upstream's image prints its tag (main.VERSION, set by
	// rancher/local-path-provisioner scripts/build@v0.0.36); the
	// stand-in's says it is a stand-in.
	version = "v0.0.36-standin"
)

func startCmd() cli.Command {
	return cli.Command{
		Name: "start",
		Flags: []cli.Flag{
			cli.StringFlag{Name: flagConfigFile, Usage: "Required. Provisioner configuration file."},
			cli.StringFlag{Name: flagProvisionerName, Usage: "Required. Specify Provisioner name.", EnvVar: "PROVISIONER_NAME", Value: "rancher.io/local-path"},
			cli.StringFlag{Name: flagNamespace, Usage: "Required. The namespace that Provisioner is running in", EnvVar: "POD_NAMESPACE", Value: "local-path-storage"},
			cli.StringFlag{Name: flagHelperImage, Usage: "Required. The helper image used for create/delete directories on the host", EnvVar: "HELPER_IMAGE", Value: "rancher/library-busybox:1.32.1"},
			cli.StringFlag{Name: flagKubeconfig, Usage: "Paths to a kubeconfig. Only required when it is out-of-cluster."},
			cli.StringFlag{Name: flagConfigMapName, Usage: "Required. Specify configmap name.", Value: "local-path-config"},
			cli.StringFlag{Name: flagServiceAccountName, Usage: "Required. The ServiceAccountName for deployment", EnvVar: "SERVICE_ACCOUNT_NAME", Value: "local-path-provisioner-service-account"},
			cli.StringFlag{Name: flagHelperPodFile, Usage: "Paths to the Helper pod yaml file"},
			cli.IntFlag{Name: flagWorkerThreads, Usage: "Number of provisioner worker threads.", Value: pvController.DefaultThreadiness},
			cli.IntFlag{Name: flagProvisioningRetries, Usage: "Number of retries of failed volume provisioning. 0 means retry indefinitely.", Value: pvController.DefaultFailedProvisionThreshold},
			cli.IntFlag{Name: flagDeletionRetries, Usage: "Number of retries of failed volume deletion. 0 means retry indefinitely.", Value: pvController.DefaultFailedDeleteThreshold},
			cli.BoolFlag{Name: flagAllowUnsafeHelperPod, Usage: "Allow helper pod templates to set unsafe pod fields such as securityContext or custom volumes.", EnvVar: "ALLOW_UNSAFE_HELPER_POD_TEMPLATE"},
			cli.IntFlag{Name: flagKubeClientBurst, Usage: "Burst value for kubernetes client.", Value: rest.DefaultBurst},
			cli.Float64Flag{Name: flagKubeClientQPS, Usage: "QPS value for kubernetes client.", Value: float64(rest.DefaultQPS)},
		},
		Action: func(c *cli.Context) {
			if err := startDaemon(c); err != nil {
				logrus.Fatalf("Error starting daemon: %v", err)
			}
		},
	}
}

// inClusterConfig is rest.InClusterConfig; a test gives its own, as only
// a pod has the service account's token.
var inClusterConfig = rest.InClusterConfig

// homeDir is rancher/local-path-provisioner main.go@v0.0.36's: $HOME,
// else $USERPROFILE, else "" (and then .kube/config is relative to the
// working directory).
func homeDir() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	return os.Getenv("USERPROFILE")
}

// loadConfig keeps rancher/local-path-provisioner main.go@v0.0.36
// loadConfig's order: --kubeconfig, the first file of $KUBECONFIG that
// exists, in-cluster, and only then ~/.kube/config (which must exist), so
// a pod with a kubeconfig in its home still talks to its own cluster.
func loadConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if p := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); p != "" {
		for _, f := range filepath.SplitList(p) {
			if _, err := os.Stat(f); err == nil {
				return clientcmd.BuildConfigFromFlags("", f)
			}
		}
	}
	if c, err := inClusterConfig(); err == nil {
		return c, nil
	}
	return clientcmd.BuildConfigFromFlags("", filepath.Join(homeDir(), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName))
}

// clientConfig is the client config with the command line's burst and QPS.
func clientConfig(c *cli.Context) (*rest.Config, error) {
	cfg, err := loadConfig(c.String(flagKubeconfig))
	if err != nil {
		return nil, fmt.Errorf("unable to get client config: %w", err)
	}
	cfg.Burst = c.Int(flagKubeClientBurst)
	cfg.QPS = float32(c.Float64(flagKubeClientQPS))
	return cfg, nil
}

func fromConfigMap(ctx context.Context, cs kubernetes.Interface, namespace, name, key string) (string, error) {
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	v, ok := cm.Data[key]
	if !ok {
		return "", fmt.Errorf("%v is not exist in local-path-config ConfigMap", key)
	}
	return v, nil
}

// settings is what start runs with, the command line checked.
type settings struct {
	provisionerName, namespace, configMapName, configFile string
	helperImage, serviceAccount, helperPodYAML            string
	provisioningRetries, deletionRetries, workerThreads   int
	allowUnsafeHelperPod                                  bool
}

// startSettings checks the command line in rancher/local-path-provisioner
// main.go@v0.0.36 startDaemon's order, so that of two faults the same one
// is reported: the config is looked up before the helper image and service
// account are checked.
// The helper image is checked but, as upstream, used nowhere: the helper
// pod template names its own.
func startSettings(ctx context.Context, c *cli.Context, cs kubernetes.Interface) (*settings, error) {
	s := &settings{provisionerName: c.String(flagProvisionerName), namespace: c.String(flagNamespace), configMapName: c.String(flagConfigMapName)}
	if s.provisionerName == "" {
		return nil, fmt.Errorf("invalid empty flag %v", flagProvisionerName)
	}
	if s.namespace == "" {
		return nil, fmt.Errorf("invalid empty flag %v", flagNamespace)
	}
	if s.configMapName == "" {
		return nil, fmt.Errorf("invalid empty flag %v", flagConfigMapName)
	}
	var err error
	if s.configFile = c.String(flagConfigFile); s.configFile == "" {
		if s.configFile, err = fromConfigMap(ctx, cs, s.namespace, s.configMapName, defaultConfigFileKey); err != nil {
			return nil, fmt.Errorf("invalid empty flag %v and it also does not exist at ConfigMap %v/%v with err: %v", flagConfigFile, s.namespace, s.configMapName, err)
		}
	}
	if s.helperImage = c.String(flagHelperImage); s.helperImage == "" {
		return nil, fmt.Errorf("invalid empty flag %v", flagHelperImage)
	}
	if s.serviceAccount = c.String(flagServiceAccountName); s.serviceAccount == "" {
		return nil, fmt.Errorf("invalid empty flag %v", flagServiceAccountName)
	}
	if f := c.String(flagHelperPodFile); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("could not open file %v with err: %v", f, err)
		}
		s.helperPodYAML = string(b)
	} else if s.helperPodYAML, err = fromConfigMap(ctx, cs, s.namespace, s.configMapName, defaultHelperPodFileKey); err != nil {
		return nil, fmt.Errorf("invalid empty flag %v and it also does not exist at ConfigMap %v/%v with err: %v", flagHelperPodFile, s.namespace, s.configMapName, err)
	}
	if s.provisioningRetries = c.Int(flagProvisioningRetries); s.provisioningRetries < 0 {
		return nil, fmt.Errorf("invalid negative integer flag %v", flagProvisioningRetries)
	}
	if s.deletionRetries = c.Int(flagDeletionRetries); s.deletionRetries < 0 {
		return nil, fmt.Errorf("invalid negative integer flag %v", flagDeletionRetries)
	}
	if s.workerThreads = c.Int(flagWorkerThreads); s.workerThreads <= 0 {
		return nil, fmt.Errorf("invalid zero or negative integer flag %v", flagWorkerThreads)
	}
	s.allowUnsafeHelperPod = c.Bool(flagAllowUnsafeHelperPod)
	return s, nil
}

func startDaemon(c *cli.Context) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	cfg, err := clientConfig(c)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("unable to get k8s client: %w", err)
	}
	s, err := startSettings(ctx, c, cs)
	if err != nil {
		return err
	}
	p, err := newProvisioner(ctx, cs, s.configFile, s.namespace, s.serviceAccount, s.configMapName, s.helperPodYAML, s.allowUnsafeHelperPod)
	if err != nil {
		return err
	}
	pc := pvController.NewProvisionController(ctx, cs, s.provisionerName, p,
		pvController.LeaderElection(false),
		pvController.FailedProvisionThreshold(s.provisioningRetries),
		pvController.FailedDeleteThreshold(s.deletionRetries),
		pvController.Threadiness(s.workerThreads),
	)
	pc.Run(ctx)
	return nil
}

// newApp is rancher/local-path-provisioner main.go@v0.0.36's app. An
// unknown command, and a usage error before the command, panic there
// (cmdNotFound, onUsageError): the process dies with Go's exit status 2,
// which a pod's restarts show.
func newApp() *cli.App {
	a := cli.NewApp()
	a.Version = version
	a.Usage = "Local Path Provisioner"
	a.Flags = []cli.Flag{cli.BoolFlag{Name: "debug, d", Usage: "enable debug logging level", EnvVar: "RANCHER_DEBUG"}}
	a.Before = func(c *cli.Context) error {
		if c.GlobalBool("debug") {
			logrus.SetLevel(logrus.DebugLevel)
		}
		return nil
	}
	a.Commands = []cli.Command{startCmd()}
	a.CommandNotFound = func(_ *cli.Context, command string) {
		panic(fmt.Errorf("unrecognized command: %s", command))
	}
	a.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		//nolint:staticcheck // ST1005: upstream's message, word for word (errors.Wrap in rancher/local-path-provisioner main.go@v0.0.36 onUsageError).
		panic(fmt.Errorf("Usage error, please check your command: %w", err))
	}
	return a
}

func main() {
	logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	if err := newApp().Run(os.Args); err != nil {
		logrus.Fatalf("Critical error: %v", err)
	}
}
