// Command local-path-provisioner stands in for rancher/local-path-provisioner
// v0.0.36, the version k3s v1.35.5+k3s1 deploys (its release's "Embedded
// Component Versions"), whose module the proxy refuses. It runs the same
// controller library at the version v0.0.36 pins
// (sigs.k8s.io/sig-storage-lib-external-provisioner/v11 v11.0.1, go.mod@v0.0.36),
// so which claims are provisioned, how PVs are named, bound and released,
// retries and events are the library's; the provisioner it drives is
// written here from main.go, provisioner.go and util.go@v0.0.36: the same
// command line, config file, helper pods and PersistentVolumes. Nothing in
// it knows the rig.
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
)

func startCmd() cli.Command {
	return cli.Command{
		Name: "start",
		Flags: []cli.Flag{
			cli.StringFlag{Name: flagConfigFile, Usage: "Required. Provisioner configuration file."},
			cli.StringFlag{Name: flagProvisionerName, EnvVar: "PROVISIONER_NAME", Value: "rancher.io/local-path"},
			cli.StringFlag{Name: flagNamespace, EnvVar: "POD_NAMESPACE", Value: "local-path-storage"},
			cli.StringFlag{Name: flagHelperImage, EnvVar: "HELPER_IMAGE", Value: "rancher/library-busybox:1.32.1"},
			cli.StringFlag{Name: flagKubeconfig},
			cli.StringFlag{Name: flagConfigMapName, Value: "local-path-config"},
			cli.StringFlag{Name: flagServiceAccountName, EnvVar: "SERVICE_ACCOUNT_NAME", Value: "local-path-provisioner-service-account"},
			cli.StringFlag{Name: flagHelperPodFile},
			cli.IntFlag{Name: flagWorkerThreads, Value: pvController.DefaultThreadiness},
			cli.IntFlag{Name: flagProvisioningRetries, Value: pvController.DefaultFailedProvisionThreshold},
			cli.IntFlag{Name: flagDeletionRetries, Value: pvController.DefaultFailedDeleteThreshold},
			cli.BoolFlag{Name: flagAllowUnsafeHelperPod, EnvVar: "ALLOW_UNSAFE_HELPER_POD_TEMPLATE"},
			cli.IntFlag{Name: flagKubeClientBurst, Value: rest.DefaultBurst},
			cli.Float64Flag{Name: flagKubeClientQPS, Value: float64(rest.DefaultQPS)},
		},
		Action: func(c *cli.Context) {
			if err := startDaemon(c); err != nil {
				logrus.Fatalf("Error starting daemon: %v", err)
			}
		},
	}
}

// loadConfig: --kubeconfig, then $KUBECONFIG, ~/.kube/config, in-cluster.
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
	if home, err := os.UserHomeDir(); err == nil {
		if f := filepath.Join(home, ".kube", "config"); fileExists(f) {
			return clientcmd.BuildConfigFromFlags("", f)
		}
	}
	return clientcmd.BuildConfigFromFlags("", "")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

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

func startDaemon(c *cli.Context) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	cfg, err := loadConfig(c.String(flagKubeconfig))
	if err != nil {
		return fmt.Errorf("unable to get client config: %w", err)
	}
	cfg.Burst = c.Int(flagKubeClientBurst)
	cfg.QPS = float32(c.Float64(flagKubeClientQPS))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("unable to get k8s client: %w", err)
	}
	for _, f := range []string{flagProvisionerName, flagNamespace, flagConfigMapName, flagHelperImage, flagServiceAccountName} {
		if c.String(f) == "" {
			return fmt.Errorf("invalid empty flag %v", f)
		}
	}
	namespace, cmName := c.String(flagNamespace), c.String(flagConfigMapName)
	configFile := c.String(flagConfigFile)
	if configFile == "" {
		if configFile, err = fromConfigMap(ctx, cs, namespace, cmName, defaultConfigFileKey); err != nil {
			return fmt.Errorf("invalid empty flag %v and it also does not exist at ConfigMap %v/%v with err: %v", flagConfigFile, namespace, cmName, err)
		}
	}
	var helperPodYAML string
	if f := c.String(flagHelperPodFile); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("could not open file %v with err: %v", f, err)
		}
		helperPodYAML = string(b)
	} else if helperPodYAML, err = fromConfigMap(ctx, cs, namespace, cmName, defaultHelperPodFileKey); err != nil {
		return fmt.Errorf("invalid empty flag %v and it also does not exist at ConfigMap %v/%v with err: %v", flagHelperPodFile, namespace, cmName, err)
	}
	if c.Int(flagProvisioningRetries) < 0 {
		return fmt.Errorf("invalid negative integer flag %v", flagProvisioningRetries)
	}
	if c.Int(flagDeletionRetries) < 0 {
		return fmt.Errorf("invalid negative integer flag %v", flagDeletionRetries)
	}
	if c.Int(flagWorkerThreads) <= 0 {
		return fmt.Errorf("invalid zero or negative integer flag %v", flagWorkerThreads)
	}
	p, err := newProvisioner(ctx, cs, configFile, namespace, c.String(flagServiceAccountName), cmName, helperPodYAML, c.Bool(flagAllowUnsafeHelperPod))
	if err != nil {
		return err
	}
	pc := pvController.NewProvisionController(ctx, cs, c.String(flagProvisionerName), p,
		pvController.LeaderElection(false),
		pvController.FailedProvisionThreshold(c.Int(flagProvisioningRetries)),
		pvController.FailedDeleteThreshold(c.Int(flagDeletionRetries)),
		pvController.Threadiness(c.Int(flagWorkerThreads)),
	)
	pc.Run(ctx)
	return nil
}

func main() {
	logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	a := cli.NewApp()
	a.Version = "v0.0.36-standin"
	a.Usage = "Local Path Provisioner (sriov-lane stand-in)"
	a.Flags = []cli.Flag{cli.BoolFlag{Name: "debug, d", EnvVar: "RANCHER_DEBUG"}}
	a.Before = func(c *cli.Context) error {
		if c.GlobalBool("debug") {
			logrus.SetLevel(logrus.DebugLevel)
		}
		return nil
	}
	a.Commands = []cli.Command{startCmd()}
	a.CommandNotFound = func(_ *cli.Context, command string) {
		logrus.Fatalf("Unrecognized command: %s", command)
	}
	a.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		logrus.Fatalf("Usage error, please check your command")
		return err
	}
	if err := a.Run(os.Args); err != nil {
		logrus.Fatalf("Critical error: %v", err)
	}
}
