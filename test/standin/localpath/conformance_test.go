package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	pvController "sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
)

// Conformance: each input k3s or a user hands local-path-provisioner (the
// Deployment's command line and environment, the ConfigMap's config.json
// and helper pod template, a StorageClass's parameters and annotations, a
// claim, a PV to delete), with what v0.0.36 does with it, read at the tag
// (git show v0.0.36:PATH), and the stand-in doing exactly that. The
// controller library is the same module at the same version, so its rows
// run it. A row with a deviation says how and why the stand-in differs.
// row and checkRows are test/standin/conformance's Row and Check, kept
// here as flannelcni keeps them: this module requires only what
// local-path-provisioner requires, not the project's module.
type row struct {
	src       string // "repo PATH@TAG"
	what      string // the input, and what upstream does with it
	got       func(t *testing.T) string
	want      string
	deviation string
}

func checkRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.what, func(t *testing.T) {
			if r.src == "" || !strings.Contains(r.src, "@") {
				t.Errorf("no repo PATH@TAG source")
			}
			if got := r.got(t); got != r.want {
				msg := fmt.Sprintf("\n  got  %q\n  want %q\n  source %s", got, r.want, r.src)
				if r.deviation != "" {
					msg += "\n  (the stand-in's deviation: " + r.deviation + ")"
				}
				t.Error(msg)
			}
		})
	}
}

const (
	lpp     = "rancher/local-path-provisioner "
	at      = "@v0.0.36"
	mainGo  = lpp + "main.go" + at
	provGo  = lpp + "provisioner.go" + at
	utilGo  = lpp + "util.go" + at
	k3sYAML = "k3s-io/k3s manifests/local-storage.yaml@v1.35.5+k3s1 (read at 6a4781ad)"
	lib     = "kubernetes-sigs/sig-storage-lib-external-provisioner controller/controller.go@v11.0.1"
	libVol  = "kubernetes-sigs/sig-storage-lib-external-provisioner controller/volume.go@v11.0.1"
	cliGo   = "urfave/cli app.go, command.go, help.go@v1.22.17"

	// storage is k3s's --default-local-storage-path, which k3s writes
	// into config.json for %{DEFAULT_LOCAL_STORAGE_PATH}%.
	storage = "/var/lib/rancher/k3s/storage"
)

// k3s's config.json and helper pod template, as local-storage.yaml has
// them, with the default storage path and no system default registry.
const (
	k3sConfig = `{
  "nodePathMap":[
  {
    "node":"DEFAULT_PATH_FOR_NON_LISTED_NODES",
    "paths":["` + storage + `"]
  }
  ]
}`
	k3sHelper = `apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  containers:
  - name: helper-pod
    image: "rancher/mirrored-library-busybox:1.37.0"
    imagePullPolicy: IfNotPresent`
)

// TestMain keeps the provisioner's log (a line per helper pod step) out
// of the test's output.
func TestMain(m *testing.M) {
	logrus.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// panicked runs f and says how it panicked, or "" when it did not.
func panicked(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint("panic: ", r)
		}
	}()
	f()
	return ""
}

// ---- the command line ----

// startEnv are the variables start reads; each row starts without them.
var startEnv = []string{"PROVISIONER_NAME", "POD_NAMESPACE", "HELPER_IMAGE", "SERVICE_ACCOUNT_NAME", "ALLOW_UNSAFE_HELPER_POD_TEMPLATE", "RANCHER_DEBUG", "CONFIG_MOUNT_PATH"}

func clearEnv(t *testing.T) {
	for _, k := range startEnv {
		t.Setenv(k, "")
		_ = os.Unsetenv(k)
	}
}

// run runs the stand-in's command line with env set and action as
// start's action, and says what it printed and how it ended.
func run(t *testing.T, env map[string]string, action func(c *cli.Context) string, args ...string) string {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	level := logrus.GetLevel()
	defer logrus.SetLevel(level)
	a := newApp()
	var out bytes.Buffer
	a.Writer, a.ErrWriter = &out, &out
	got := "start did not run"
	a.Commands[0].Action = func(c *cli.Context) { got = action(c) }
	var err error
	if p := panicked(func() { err = a.Run(append([]string{"local-path-provisioner"}, args...)) }); p != "" {
		return p
	}
	printed := strings.ReplaceAll(strings.SplitN(strings.TrimSpace(out.String()), "\n", 2)[0], a.Name, "$0")
	switch {
	case err != nil:
		return fmt.Sprintf("error %v; printed %q", err, printed)
	case printed != "":
		return "printed " + printed + "; " + got
	}
	return got
}

// start runs the command line with a ConfigMap local-path-config in
// kube-system holding cm, and says what start would run with, or why not.
func start(env, cm map[string]string, args ...string) func(*testing.T) string {
	return func(t *testing.T) string {
		var objs []runtime.Object
		if cm != nil {
			objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "local-path-config"}, Data: cm})
		}
		cs := fake.NewClientset(objs...)
		return run(t, env, func(c *cli.Context) string {
			s, err := startSettings(t.Context(), c, cs)
			if err != nil {
				return "refused: " + err.Error()
			}
			return fmt.Sprintf("name %s, namespace %s, configmap %s, config %q, helper image %s, service account %s, helper pod %q, retries %d/%d, threads %d, unsafe %v",
				s.provisionerName, s.namespace, s.configMapName, s.configFile, s.helperImage, s.serviceAccount, s.helperPodYAML,
				s.provisioningRetries, s.deletionRetries, s.workerThreads, s.allowUnsafeHelperPod)
		}, args...)
	}
}

// k3sEnv and k3sArgs are the Deployment's: POD_NAMESPACE from its
// namespace, start --config on the mounted ConfigMap. k3sCM is its
// ConfigMap's keys, with markers for values start only passes on.
var (
	k3sEnv  = map[string]string{"POD_NAMESPACE": "kube-system"}
	k3sArgs = []string{"start", "--config", "/etc/config/config.json"}
	k3sCM   = map[string]string{"config.json": "CONFIG", "helperPod.yaml": "HELPER", "setup": "", "teardown": ""}
)

func TestConformanceCommandLine(t *testing.T) {
	const k3sRun = `name rancher.io/local-path, namespace kube-system, configmap local-path-config, config "/etc/config/config.json", helper image rancher/library-busybox:1.32.1, service account local-path-provisioner-service-account, helper pod "HELPER", retries 15/15, threads 4, unsafe false`
	checkRows(t, []row{
		{mainGo + " StartCmd, startDaemon; " + k3sYAML, "k3s's Deployment (start --config /etc/config/config.json, POD_NAMESPACE=kube-system): the defaults, the helper pod template from the ConfigMap's helperPod.yaml",
			start(k3sEnv, k3sCM, k3sArgs...), k3sRun, ""},
		{mainGo + " StartCmd", "no POD_NAMESPACE: namespace local-path-storage",
			start(nil, nil, k3sArgs...), `refused: invalid empty flag helper-pod-file and it also does not exist at ConfigMap local-path-storage/local-path-config with err: configmaps "local-path-config" not found`, ""},
		{mainGo + " StartCmd", "PROVISIONER_NAME, HELPER_IMAGE, SERVICE_ACCOUNT_NAME and ALLOW_UNSAFE_HELPER_POD_TEMPLATE set their flags",
			start(map[string]string{"POD_NAMESPACE": "kube-system", "PROVISIONER_NAME": "example.com/lp", "HELPER_IMAGE": "img", "SERVICE_ACCOUNT_NAME": "sa", "ALLOW_UNSAFE_HELPER_POD_TEMPLATE": "true"}, k3sCM, k3sArgs...),
			`name example.com/lp, namespace kube-system, configmap local-path-config, config "/etc/config/config.json", helper image img, service account sa, helper pod "HELPER", retries 15/15, threads 4, unsafe true`, ""},
		{mainGo + " StartCmd", "a flag beats its environment variable",
			start(map[string]string{"POD_NAMESPACE": "elsewhere"}, k3sCM, "start", "--namespace", "kube-system", "--config", "/c.json"),
			strings.Replace(k3sRun, `"/etc/config/config.json"`, `"/c.json"`, 1), ""},
		{mainGo + " StartCmd", "--worker-threads, --provisioning-retry-count, --deletion-retry-count (0: retry for ever)",
			start(k3sEnv, k3sCM, "start", "--config", "/c.json", "--worker-threads", "2", "--provisioning-retry-count", "0", "--deletion-retry-count", "3"),
			strings.Replace(strings.Replace(k3sRun, "retries 15/15, threads 4", "retries 0/3, threads 2", 1), `"/etc/config/config.json"`, `"/c.json"`, 1), ""},
		{mainGo + " StartCmd, findConfigFileFromConfigMap", "--configmap-name: the ConfigMap read",
			start(k3sEnv, k3sCM, "start", "--config", "/c.json", "--configmap-name", "other"),
			`refused: invalid empty flag helper-pod-file and it also does not exist at ConfigMap kube-system/other with err: configmaps "other" not found`, ""},
		{mainGo + " startDaemon", "no --config: config.json from the ConfigMap, as its text",
			start(k3sEnv, k3sCM, "start"), strings.Replace(k3sRun, `"/etc/config/config.json"`, `"CONFIG"`, 1), ""},
		{mainGo + " findConfigFileFromConfigMap", "no --config and no config.json in the ConfigMap: refused",
			start(k3sEnv, map[string]string{"helperPod.yaml": "HELPER"}, "start"),
			"refused: invalid empty flag config and it also does not exist at ConfigMap kube-system/local-path-config with err: config.json is not exist in local-path-config ConfigMap", ""},
		{mainGo + " startDaemon", "no helperPod.yaml in the ConfigMap and no --helper-pod-file: refused",
			start(k3sEnv, map[string]string{"config.json": "CONFIG"}, k3sArgs...),
			"refused: invalid empty flag helper-pod-file and it also does not exist at ConfigMap kube-system/local-path-config with err: helperPod.yaml is not exist in local-path-config ConfigMap", ""},
		{mainGo + " startDaemon, loadFile", "--helper-pod-file: the template read from that file; one that cannot be read is refused",
			func(t *testing.T) string {
				f := filepath.Join(t.TempDir(), "helperPod.yaml")
				if err := os.WriteFile(f, []byte("FROM FILE"), 0o644); err != nil {
					t.Fatal(err)
				}
				ok := start(k3sEnv, k3sCM, "start", "--config", "/c.json", "--helper-pod-file", f)(t)
				bad := start(k3sEnv, k3sCM, "start", "--config", "/c.json", "--helper-pod-file", "/no/such/file")(t)
				return strings.Split(strings.SplitN(ok, `helper pod "`, 2)[1], `"`)[0] + " | " + bad
			}, "FROM FILE | refused: could not open file /no/such/file with err: open /no/such/file: no such file or directory", ""},
		{mainGo + " startDaemon", "an empty --provisioner-name: refused",
			start(k3sEnv, k3sCM, "start", "--provisioner-name=", "--config", "/c.json"), "refused: invalid empty flag provisioner-name", ""},
		{mainGo + " startDaemon", "an empty --namespace or --configmap-name: refused",
			func(t *testing.T) string {
				return start(nil, k3sCM, "start", "--namespace=", "--config", "/c.json")(t) + " | " + start(k3sEnv, k3sCM, "start", "--configmap-name=", "--config", "/c.json")(t)
			}, "refused: invalid empty flag namespace | refused: invalid empty flag configmap-name", ""},
		{mainGo + " startDaemon", "an empty --helper-image or --service-account-name: refused, but only after the config was found: with neither --config nor config.json, that is what is reported",
			func(t *testing.T) string {
				return start(k3sEnv, k3sCM, "start", "--helper-image=", "--config", "/c.json")(t) + " | " +
					start(k3sEnv, k3sCM, "start", "--service-account-name=", "--config", "/c.json")(t) + " | " +
					start(k3sEnv, nil, "start", "--helper-image=")(t)
			}, "refused: invalid empty flag helper-image | refused: invalid empty flag service-account-name | " +
				`refused: invalid empty flag config and it also does not exist at ConfigMap kube-system/local-path-config with err: configmaps "local-path-config" not found`, ""},
		{mainGo + " startDaemon", "negative retry counts and zero worker threads: refused",
			func(t *testing.T) string {
				var out []string
				for _, a := range [][]string{{"--provisioning-retry-count", "-1"}, {"--deletion-retry-count", "-1"}, {"--worker-threads", "0"}} {
					out = append(out, start(k3sEnv, k3sCM, append([]string{"start", "--config", "/c.json"}, a...)...)(t))
				}
				return strings.Join(out, " | ")
			}, "refused: invalid negative integer flag provisioning-retry-count | refused: invalid negative integer flag deletion-retry-count | refused: invalid zero or negative integer flag worker-threads", ""},
		{cliGo + " (IntFlag)", "a retry count that is not a number: the command's usage error, start does not run; main exits 1 with it",
			start(k3sEnv, k3sCM, "start", "--config", "/c.json", "--worker-threads", "many"),
			`error invalid value "many" for flag -worker-threads: parse error; printed "Incorrect Usage: invalid value \"many\" for flag -worker-threads: parse error"`, ""},
		{cliGo + " (Command.Run: the command has no OnUsageError)", "an unknown flag of start: the same",
			start(k3sEnv, k3sCM, "start", "--no-such"),
			`error flag provided but not defined: -no-such; printed "Incorrect Usage: flag provided but not defined: -no-such"`, ""},
		{mainGo + " onUsageError", "an unknown flag before the command: panics",
			start(k3sEnv, k3sCM, "--no-such", "start"), "panic: Usage error, please check your command: flag provided but not defined: -no-such", ""},
		{mainGo + " cmdNotFound; " + cliGo + " (helpCommand → ShowCommandHelp)", "an unknown command: panics",
			start(k3sEnv, k3sCM, "stop"), "panic: unrecognized command: stop", ""},
		{mainGo + " main; " + lpp + "scripts/build" + at, "--version: the binary's name and version",
			start(nil, nil, "--version"), "printed $0 version v0.0.36-standin; start did not run",
			"upstream's image prints v0.0.36 (scripts/build sets main.VERSION to the tag); the stand-in says it is one"},
		{mainGo + " main", "--debug, or RANCHER_DEBUG: logrus at debug",
			func(t *testing.T) string {
				level := func(c *cli.Context) string { return logrus.GetLevel().String() }
				return run(t, nil, level, "start") + " | " + run(t, nil, level, "--debug", "start") + " | " + run(t, map[string]string{"RANCHER_DEBUG": "true"}, level, "start")
			}, "info | debug | debug", ""},
	})
}

// kubeconfig writes a kubeconfig for server into dir/name.
func kubeconfig(t *testing.T, dir, name, server string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// client runs start with env, in a cluster when inCluster (a pod's
// service account), and says which API server start would talk to, with
// what burst and QPS; $DIR is a directory holding a kubeconfig for
// https://flag (flag.yaml), https://env (env.yaml) and https://home
// (home/.kube/config).
func client(inCluster bool, env map[string]string, args ...string) func(*testing.T) string {
	return func(t *testing.T) string {
		dir := t.TempDir()
		kubeconfig(t, dir, "flag.yaml", "https://flag")
		kubeconfig(t, dir, "env.yaml", "https://env")
		kubeconfig(t, dir, "home/.kube/config", "https://home")
		old := inClusterConfig
		t.Cleanup(func() { inClusterConfig = old })
		inClusterConfig = func() (*rest.Config, error) {
			if inCluster {
				return &rest.Config{Host: "https://in-cluster"}, nil
			}
			return nil, rest.ErrNotInCluster
		}
		t.Setenv("KUBECONFIG", "")
		t.Setenv("HOME", "")
		t.Setenv("USERPROFILE", "")
		for k, v := range env {
			t.Setenv(k, strings.ReplaceAll(v, "$DIR", dir))
		}
		args = slices.Clone(args)
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "$DIR", dir)
		}
		return strings.ReplaceAll(run(t, nil, func(c *cli.Context) string {
			cfg, err := clientConfig(c)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprintf("%s, burst %d, qps %g", cfg.Host, cfg.Burst, cfg.QPS)
		}, append([]string{"start"}, args...)...), dir, "$DIR")
	}
}

func TestConformanceClientConfig(t *testing.T) {
	all := map[string]string{"KUBECONFIG": "$DIR/env.yaml", "HOME": "$DIR/home"}
	checkRows(t, []row{
		{mainGo + " loadConfig; " + k3sYAML, "k3s's Deployment (in a pod, no --kubeconfig, no $KUBECONFIG): the in-cluster config, burst 10 and QPS 5 (rest.DefaultBurst, DefaultQPS)",
			client(true, map[string]string{"HOME": "$DIR/home"}), "https://in-cluster, burst 10, qps 5", ""},
		{mainGo + " loadConfig", "--kubeconfig before everything else", client(true, all, "--kubeconfig", "$DIR/flag.yaml"), "https://flag, burst 10, qps 5", ""},
		{mainGo + " loadConfig", "$KUBECONFIG's first file that exists, before in-cluster",
			client(true, map[string]string{"KUBECONFIG": "$DIR/none.yaml:$DIR/env.yaml", "HOME": "$DIR/home"}), "https://env, burst 10, qps 5", ""},
		{mainGo + " loadConfig", "$KUBECONFIG naming no file that exists: in-cluster, before ~/.kube/config",
			client(true, map[string]string{"KUBECONFIG": "$DIR/none.yaml", "HOME": "$DIR/home"}), "https://in-cluster, burst 10, qps 5", ""},
		{mainGo + " loadConfig, homeDir", "outside a pod: $HOME/.kube/config", client(false, map[string]string{"HOME": "$DIR/home"}), "https://home, burst 10, qps 5", ""},
		{mainGo + " homeDir", "no $HOME: $USERPROFILE/.kube/config", client(false, map[string]string{"USERPROFILE": "$DIR/home"}), "https://home, burst 10, qps 5", ""},
		{mainGo + " loadConfig", "outside a pod with no ~/.kube/config: refused",
			client(false, map[string]string{"HOME": "$DIR/nohome"}), "unable to get client config: stat $DIR/nohome/.kube/config: no such file or directory", ""},
		{mainGo + " startDaemon", "--kube-client-burst and --kube-client-qps set the client's",
			client(true, nil, "--kube-client-burst", "50", "--kube-client-qps", "20.5"), "https://in-cluster, burst 50, qps 20.5", ""},
	})
}

// ---- config.json ----

// describe says what a checked config holds: paths by node (sorted), the
// shared file system, the class configs, timeout and commands.
func describe(c *config) string {
	class := func(cc classConfig) string {
		var nodes []string
		for n, ps := range cc.nodePaths {
			var paths []string
			for p := range ps {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			nodes = append(nodes, fmt.Sprintf("%s:%v", n, paths))
		}
		sort.Strings(nodes)
		return fmt.Sprintf("nodes %v shared %q", nodes, cc.sharedFS)
	}
	s := fmt.Sprintf("timeout %d, setup %q, teardown %q, ", c.cmdTimeoutSeconds, c.setupCommand, c.teardownCommand)
	if len(c.classes) == 0 {
		return s + class(c.classConfig)
	}
	var names []string
	for n := range c.classes {
		names = append(names, n)
	}
	sort.Strings(names)
	var cs []string
	for _, n := range names {
		cs = append(cs, n+": "+class(c.classes[n]))
	}
	return s + "classes {" + strings.Join(cs, "; ") + "}"
}

// load reads and checks a config given as a value (asFile false: from
// the ConfigMap) or as a .json file holding it (--config), and says what
// it holds or why it is refused; $DIR is the file's directory.
func load(js string, asFile bool) func(*testing.T) string {
	return func(t *testing.T) string {
		dir := t.TempDir()
		src := js
		if asFile {
			src = filepath.Join(dir, "config.json")
			if err := os.WriteFile(src, []byte(js), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var out string
		if p := panicked(func() {
			d, err := readConfig(src)
			if err != nil {
				out = "refused: " + err.Error()
				return
			}
			c, err := canonicalize(d)
			if err != nil {
				out = "refused: " + err.Error()
				return
			}
			out = describe(c)
		}); p != "" {
			return p
		}
		return strings.ReplaceAll(out, dir, "$DIR")
	}
}

func nodePaths(entries string) string { return `{"nodePathMap":[` + entries + `]}` }

func TestConformanceConfig(t *testing.T) {
	const k3s = `timeout 120, setup "", teardown "", nodes [DEFAULT_PATH_FOR_NON_LISTED_NODES:[` + storage + `]] shared ""`
	checkRows(t, []row{
		{provGo + " loadConfigFile, canonicalizeConfig; " + k3sYAML, "k3s's config.json, the file --config names: every node's volumes under the storage path, helper commands from the ConfigMap's scripts, a 120 s helper timeout",
			load(k3sConfig, true), k3s, ""},
		{provGo + " loadConfigFile (isJSONFile)", "the same JSON as a value (no --config: the ConfigMap's text): the same",
			load(k3sConfig, false), k3s, ""},
		{provGo + " loadConfigFile", "a .json file that does not exist: refused", func(t *testing.T) string {
			_, err := readConfig("/no/such/config.json")
			return err.Error()
		}, "fail to load config file /no/such/config.json: open /no/such/config.json: no such file or directory", ""},
		{provGo + " loadConfigFile (json.Decoder)", "a .json file with more after its JSON object: that is not read",
			load(k3sConfig+"\ntrailing words", true), k3s, ""},
		{provGo + " loadConfigFile (json.Decoder)", "an empty .json file: refused, EOF", load("", true), "refused: fail to load config file $DIR/config.json: EOF", ""},
		{provGo + " unmarshalFromString", "a value with more after its JSON object: refused",
			load(`{}x`, false), "refused: fail to load config file {}x: invalid character 'x' after top-level value", ""},
		{provGo + " canonicalizeStorageClassConfig", "a relative path: refused", load(nodePaths(`{"node":"a","paths":["rel"]}`), false),
			"refused: StorageClass config canonicalization failed: path must start with / for path rel on node a", ""},
		{provGo + " canonicalizeStorageClassConfig", "/ (or a path that cleans to it): refused", func(t *testing.T) string {
			return load(nodePaths(`{"node":"a","paths":["/"]}`), false)(t) + " | " + load(nodePaths(`{"node":"a","paths":["/x/.."]}`), false)(t)
		}, "refused: StorageClass config canonicalization failed: cannot use root ('/') as path on node a | refused: StorageClass config canonicalization failed: cannot use root ('/') as path on node a", ""},
		{provGo + " canonicalizeStorageClassConfig", "a node's path twice, once unclean: refused, naming the second as written",
			load(nodePaths(`{"node":"a","paths":["/x","/x/"]}`), false), "refused: StorageClass config canonicalization failed: duplicate path /x/ on node a", ""},
		{provGo + " canonicalizeStorageClassConfig", "a node twice: refused",
			load(nodePaths(`{"node":"a","paths":["/x"]},{"node":"a","paths":["/y"]}`), false), "refused: StorageClass config canonicalization failed: duplicate node a", ""},
		{provGo + " canonicalizeStorageClassConfig (p[0])", "an empty path: panics",
			load(nodePaths(`{"node":"a","paths":[""]}`), false), "panic: runtime error: index out of range [0] with length 0", ""},
		{provGo + " canonicalizeStorageClassConfig ([]*NodePathMapData)", "a null nodePathMap entry: panics",
			load(nodePaths(`null`), false), "panic: runtime error: invalid memory address or nil pointer dereference", ""},
		{provGo + " canonicalizeStorageClassConfig", "paths cleaned; a node with no paths is kept, empty",
			load(nodePaths(`{"node":"a","paths":["/b//c/","/d"]},{"node":"e"}`), false), `timeout 120, setup "", teardown "", nodes [a:[/b/c /d] e:[]] shared ""`, ""},
		{provGo + " canonicalizeConfig", "cmdTimeoutSeconds 0 or less: 120; else as given", func(t *testing.T) string {
			return load(`{"cmdTimeoutSeconds":-5,"sharedFileSystemPath":"/s"}`, false)(t) + " | " + load(`{"cmdTimeoutSeconds":7,"sharedFileSystemPath":"/s"}`, false)(t)
		}, `timeout 120, setup "", teardown "", nodes [] shared "/s" | timeout 7, setup "", teardown "", nodes [] shared "/s"`, ""},
		{provGo + " canonicalizeConfig", "setupCommand and teardownCommand kept as given",
			load(`{"setupCommand":"/bin/setup","teardownCommand":"/bin/teardown","sharedFileSystemPath":"/s"}`, false), `timeout 120, setup "/bin/setup", teardown "/bin/teardown", nodes [] shared "/s"`, ""},
		{provGo + " canonicalizeConfig", "storageClassConfigs: one config per class; the top-level nodePathMap is then neither checked nor used",
			load(`{"nodePathMap":[{"node":"a","paths":["rel"]}],"storageClassConfigs":{"fast":{"nodePathMap":[{"node":"a","paths":["/f"]}]},"shared":{"sharedFileSystemPath":"/s"}}}`, false),
			`timeout 120, setup "", teardown "", classes {fast: nodes [a:[/f]] shared ""; shared: nodes [] shared "/s"}`, ""},
		{provGo + " canonicalizeConfig", "a class config refused: the file refused, naming the class",
			load(`{"storageClassConfigs":{"fast":{"nodePathMap":[{"node":"a","paths":["rel"]}]}}}`, false),
			"refused: config for class fast is invalid: StorageClass config canonicalization failed: path must start with / for path rel on node a", ""},
		{provGo + " canonicalizeConfig, isSharedFilesystem", "both nodePathMap and sharedFileSystemPath, or neither: taken here, refused at each volume (rows of Provision)",
			func(t *testing.T) string {
				return load(`{"nodePathMap":[{"node":"a","paths":["/x"]}],"sharedFileSystemPath":"/s"}`, false)(t) + " | " + load(`{}`, false)(t)
			}, `timeout 120, setup "", teardown "", nodes [a:[/x]] shared "/s" | timeout 120, setup "", teardown "", nodes [] shared ""`, ""},
		{provGo + " refreshConfig, watchAndRefreshConfig", "the file changed under it: a valid one taken, one refused leaves the last (checked every 30 s)",
			func(t *testing.T) string {
				f := filepath.Join(t.TempDir(), "config.json")
				write := func(s string) {
					if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				write(k3sConfig)
				p, err := newProvisioner(t.Context(), fake.NewClientset(), f, "kube-system", "sa", "local-path-config", k3sHelper, false)
				if err != nil {
					t.Fatal(err)
				}
				write(`{"sharedFileSystemPath":"/s"}`)
				e1 := p.refreshConfig()
				after1 := describe(p.config)
				write(`{"sharedFileSystemPath":"/t","nodePathMap":[{"node":"a","paths":["rel"]}]}`)
				e2 := p.refreshConfig()
				return fmt.Sprintf("%v %s | %v | %s | every %v", e1, after1, e2, describe(p.config), configFileCheckInterval)
			}, `<nil> timeout 120, setup "", teardown "", nodes [] shared "/s" | StorageClass config canonicalization failed: path must start with / for path rel on node a | timeout 120, setup "", teardown "", nodes [] shared "/s" | every 30s`, ""},
	})
}

// ---- the helper pod template ----

// helperTemplate is a helper pod template with spec and container lines added.
func helperTemplate(spec, ctr string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: helper-pod\nspec:\n" + spec + "  containers:\n  - name: helper-pod\n    image: busybox\n" + ctr
}

// parse says whether the template is taken, safe and with unsafe
// templates allowed.
func parse(y string) func(*testing.T) string {
	return func(t *testing.T) string {
		one := func(unsafe bool) string {
			pod, err := parseHelperPod(y, unsafe)
			if err != nil {
				return "refused: " + err.Error()
			}
			return fmt.Sprintf("taken: %s, %d container(s)", pod.Name, len(pod.Spec.Containers))
		}
		return one(false) + " | unsafe allowed: " + one(true)
	}
}

func TestConformanceHelperPodTemplate(t *testing.T) {
	const taken = "taken: helper-pod, 1 container(s) | unsafe allowed: taken: helper-pod, 1 container(s)"
	forbid := func(what string) string {
		return "refused: helper pod template must not " + what + " unless allow-unsafe-helper-pod-template is enabled | unsafe allowed: taken: helper-pod, 1 container(s)"
	}
	rows := []row{
		{utilGo + " loadHelperPodFile, validateHelperPodTemplate; " + k3sYAML, "k3s's template: taken", parse(k3sHelper), taken, ""},
		{utilGo + " loadHelperPodFile", "not YAML: refused, quoting it", parse("a: [b"),
			"refused: invalid YAMLToJSON the helper pod with helperPodYaml: a: [b | unsafe allowed: refused: invalid YAMLToJSON the helper pod with helperPodYaml: a: [b", ""},
		{utilGo + " loadHelperPodFile", "YAML that is not a pod: refused, quoting its JSON", parse("spec: 1"),
			`refused: invalid unmarshal the helper pod with helperPodJson: {"spec":1} | unsafe allowed: refused: invalid unmarshal the helper pod with helperPodJson: {"spec":1}`, ""},
		{utilGo + " loadHelperPodFile", "no container: refused, even with unsafe templates allowed", parse("apiVersion: v1\nkind: Pod\nspec: {}\n"),
			"refused: helper pod template does not specify any container | unsafe allowed: refused: helper pod template does not specify any container", ""},
		{utilGo + " validateHelperPodTemplate", "two containers: refused unless unsafe templates are allowed",
			parse(helperTemplate("", "  - name: two\n    image: busybox\n")),
			"refused: helper pod template must specify exactly one container | unsafe allowed: taken: helper-pod, 2 container(s)", ""},
		{utilGo + " validateHelperPodTemplate", "hardening fields (non-root user and group, fsGroup, seccomp, read-only root, dropped capabilities, privileged and allowPrivilegeEscalation false), plain env: taken",
			parse(helperTemplate("  securityContext:\n    runAsNonRoot: true\n    runAsUser: 1000\n    runAsGroup: 1000\n    fsGroup: 1000\n    seccompProfile:\n      type: RuntimeDefault\n",
				"    env:\n    - name: A\n      value: b\n    securityContext:\n      readOnlyRootFilesystem: true\n      privileged: false\n      allowPrivilegeEscalation: false\n      capabilities:\n        drop: [ALL]\n")), taken, ""},
	}
	for _, f := range []struct{ what, spec, ctr, msg string }{
		{"initContainers", "  initContainers:\n  - name: i\n    image: busybox\n", "", "define initContainers"},
		{"ephemeralContainers", "  ephemeralContainers:\n  - name: e\n    image: busybox\n", "", "define ephemeralContainers"},
		{"volumes", "  volumes:\n  - name: v\n    emptyDir: {}\n", "", "define custom volumes"},
		{"hostNetwork", "  hostNetwork: true\n", "", "enable host namespaces"},
		{"hostPID", "  hostPID: true\n", "", "enable host namespaces"},
		{"hostIPC", "  hostIPC: true\n", "", "enable host namespaces"},
		{"nodeName", "  nodeName: n1\n", "", "set spec.nodeName"},
		{"serviceAccountName", "  serviceAccountName: admin\n", "", "set spec.serviceAccountName"},
		{"volumeMounts", "", "    volumeMounts:\n    - name: v\n      mountPath: /v\n", "define custom volumeMounts"},
		{"envFrom", "", "    envFrom:\n    - configMapRef:\n        name: c\n", "define envFrom"},
		{"lifecycle", "", "    lifecycle:\n      preStop:\n        exec:\n          command: [x]\n", "define container lifecycle hooks"},
		{"livenessProbe", "", "    livenessProbe:\n      exec:\n        command: [x]\n", "define container livenessProbe"},
		{"readinessProbe", "", "    readinessProbe:\n      exec:\n        command: [x]\n", "define container readinessProbe"},
		{"startupProbe", "", "    startupProbe:\n      exec:\n        command: [x]\n", "define container startupProbe"},
		{"env valueFrom", "", "    env:\n    - name: A\n      value: b\n    - name: TOKEN\n      valueFrom:\n        secretKeyRef:\n          name: s\n          key: k\n", `define env.valueFrom (env "TOKEN")`},
		{"pod runAsUser 0", "  securityContext:\n    runAsUser: 0\n", "", "set pod runAsUser to 0 (root)"},
		{"pod runAsGroup 0", "  securityContext:\n    runAsGroup: 0\n", "", "set pod runAsGroup to 0 (root)"},
		{"sysctls", "  securityContext:\n    sysctls:\n    - name: net.ipv4.ip_forward\n      value: \"1\"\n", "", "define sysctls"},
		{"privileged", "", "    securityContext:\n      privileged: true\n", "set privileged: true"},
		{"capabilities add", "", "    securityContext:\n      capabilities:\n        add: [NET_ADMIN]\n", "add capabilities"},
		{"allowPrivilegeEscalation", "", "    securityContext:\n      allowPrivilegeEscalation: true\n", "set allowPrivilegeEscalation: true"},
		{"several: the first in upstream's order", "  hostNetwork: true\n  initContainers:\n  - name: i\n    image: busybox\n", "    securityContext:\n      privileged: true\n", "define initContainers"},
	} {
		rows = append(rows, row{utilGo + " validateHelperPodTemplate", "a template with " + f.what + ": refused unless unsafe templates are allowed",
			parse(helperTemplate(f.spec, f.ctr)), forbid(f.msg), ""})
	}
	checkRows(t, rows)
}

// ---- Provision and Delete ----

// cluster is an API server with node agent-0 (hostname label, and a rack
// label) where helper pods succeed as soon as they are created, unless
// stuck, and the stand-in provisioner on it.
type cluster struct {
	cs *fake.Clientset
	p  *provisioner

	mu      sync.Mutex
	helpers []*corev1.Pod
	stuck   bool
}

func newCluster(t *testing.T, configJSON, helperYAML string, allowUnsafe bool, objs ...runtime.Object) *cluster {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-0", Labels: map[string]string{"kubernetes.io/hostname": "agent-0", "example.com/rack": "r7"}}}
	c := &cluster{cs: fake.NewClientset(append([]runtime.Object{node}, objs...)...)}
	c.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.stuck {
			pod.Status.Phase = corev1.PodSucceeded // kubelet ran the script
		}
		c.helpers = append(c.helpers, pod.DeepCopy())
		return false, nil, nil
	})
	p, err := newProvisioner(t.Context(), c.cs, configJSON, "kube-system", "local-path-provisioner-service-account", "local-path-config", helperYAML, allowUnsafe)
	if err != nil {
		t.Fatal(err)
	}
	c.p = p
	return c
}

func (c *cluster) node(t *testing.T) *corev1.Node {
	n, err := c.cs.CoreV1().Nodes().Get(t.Context(), "agent-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (c *cluster) helperNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, h := range c.helpers {
		names = append(names, h.Name)
	}
	return names
}

// left lists the pods left in kube-system.
func (c *cluster) left(t *testing.T) int {
	pods, err := c.cs.CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

// k3sClass is local-storage.yaml's StorageClass local-path, changed by mods.
func k3sClass(mods ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	del := corev1.PersistentVolumeReclaimDelete
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	c := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "local-path", Annotations: map[string]string{"defaultVolumeType": "local", "storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "rancher.io/local-path", ReclaimPolicy: &del, VolumeBindingMode: &wait,
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func param(k, v string) func(*storagev1.StorageClass) {
	return func(c *storagev1.StorageClass) {
		if c.Parameters == nil {
			c.Parameters = map[string]string{}
		}
		c.Parameters[k] = v
	}
}

// claim is a 1Gi ReadWriteOnce Filesystem claim job/disk, changed by mods.
func claim(mods ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	fs := corev1.PersistentVolumeFilesystem
	class := "local-path"
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "job", Name: "disk", UID: "123"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &fs, StorageClassName: &class,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	for _, m := range mods {
		m(c)
	}
	return c
}

func accessModes(m ...corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
}

// describePV says what a PV is: name, source, node affinity, reclaim
// policy, volume mode, capacity, access modes, annotations.
func describePV(pv *corev1.PersistentVolume) string {
	var src string
	switch s := pv.Spec.PersistentVolumeSource; {
	case s.Local != nil:
		src = "local " + s.Local.Path
	case s.HostPath != nil:
		src = fmt.Sprintf("hostPath %s %v", s.HostPath.Path, *s.HostPath.Type)
	default:
		src = "no source"
	}
	aff := "no affinity"
	if a := pv.Spec.NodeAffinity; a != nil {
		var terms []string
		for _, term := range a.Required.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				terms = append(terms, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
			}
		}
		aff = "affinity " + strings.Join(terms, ", ")
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	return fmt.Sprintf("%s: %s; %s; reclaim %s; mode %s; capacity %s; access %v; annotations %v",
		pv.Name, src, aff, pv.Spec.PersistentVolumeReclaimPolicy, *pv.Spec.VolumeMode, size.String(), pv.Spec.AccessModes, pv.Annotations)
}

// describePod says what a helper pod is.
func describePod(p *corev1.Pod) string {
	var vols []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.HostPath != nil:
			vols = append(vols, fmt.Sprintf("%s hostPath %s %v", v.Name, v.HostPath.Path, *v.HostPath.Type))
		case v.ConfigMap != nil:
			var keys []string
			for _, i := range v.ConfigMap.Items {
				keys = append(keys, i.Key+"→"+i.Path)
			}
			vols = append(vols, fmt.Sprintf("%s configMap %s %v", v.Name, v.ConfigMap.Name, keys))
		default:
			vols = append(vols, v.Name)
		}
	}
	c := p.Spec.Containers[0]
	var mounts, env, tol []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.Name+" "+m.MountPath)
	}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	for _, o := range p.Spec.Tolerations {
		tol = append(tol, fmt.Sprintf("%s %s %s", o.Key, o.Operator, o.Effect))
	}
	return fmt.Sprintf("%s/%s on %q as %s, restart %s, tolerations %v; volumes %v; %s %s mounts %v command %v args %v env %v",
		p.Namespace, p.Name, p.Spec.NodeName, p.Spec.ServiceAccountName, p.Spec.RestartPolicy, tol, vols, c.Name, c.Image, mounts, c.Command, c.Args, env)
}

// provision provisions pvc of class on the cluster, on agent-0 unless
// noNode, and says what PV it made, or why not, or how it panicked.
func (c *cluster) provision(t *testing.T, class *storagev1.StorageClass, pvc *corev1.PersistentVolumeClaim, noNode bool) string {
	t.Helper()
	opts := pvController.ProvisionOptions{StorageClass: class, PVName: "pvc-123", PVC: pvc}
	if !noNode {
		opts.SelectedNode = c.node(t)
	}
	var out string
	if p := panicked(func() {
		pv, state, err := c.p.Provision(t.Context(), opts)
		if state != pvController.ProvisioningFinished {
			out = fmt.Sprintf("state %v: ", state)
		}
		if err != nil {
			out += "refused: " + err.Error()
			return
		}
		out += describePV(pv)
	}); p != "" {
		return p
	}
	return out
}

// provisioned provisions pvc of class on a cluster with configJSON and
// k3s's template and says what PV it made, or why not.
func provisioned(configJSON string, class *storagev1.StorageClass, pvc *corev1.PersistentVolumeClaim) func(*testing.T) string {
	return func(t *testing.T) string {
		return newCluster(t, configJSON, k3sHelper, false).provision(t, class, pvc, false)
	}
}

// helperOf provisions pvc of class on a cluster with configJSON and the
// template, and describes the helper pod, and how many pods were left.
func helperOf(configJSON, helperYAML string, allowUnsafe bool, class *storagev1.StorageClass, pvc *corev1.PersistentVolumeClaim, noNode bool) func(*testing.T) string {
	return func(t *testing.T) string {
		c := newCluster(t, configJSON, helperYAML, allowUnsafe)
		if out := c.provision(t, class, pvc, noNode); strings.HasPrefix(out, "refused") || strings.HasPrefix(out, "panic") {
			return out
		}
		if len(c.helpers) != 1 {
			return fmt.Sprintf("%d helper pods", len(c.helpers))
		}
		return fmt.Sprintf("%s; %d left", describePod(c.helpers[0]), c.left(t))
	}
}

const (
	dir        = storage + "/pvc-123_job_disk"
	k3sPV      = "pvc-123: local " + dir + "; affinity kubernetes.io/hostname In [agent-0]; reclaim Delete; mode Filesystem; capacity 1Gi; access [ReadWriteOnce]; annotations map[local.path.provisioner/selected-node:agent-0]"
	scriptsVol = "script configMap local-path-config [setup→setup teardown→teardown]"
	k3sTol     = "[node.kubernetes.io/disk-pressure Exists NoSchedule]"
)

func helperPod(action, node, cmd string, dir string) string {
	parent := filepath.Dir(dir) + "/"
	return "kube-system/helper-pod-" + action + "-pvc-123 on " + fmt.Sprintf("%q", node) + " as local-path-provisioner-service-account, restart Never, tolerations " + k3sTol +
		"; volumes [data hostPath " + parent + " DirectoryOrCreate " + scriptsVol + "]; helper-pod rancher/mirrored-library-busybox:1.37.0 mounts [script /script data " + parent + "] command [/bin/sh /script/" + cmd +
		"] args [-p " + dir + " -s 1073741824 -m Filesystem -a " + action + "] env [VOL_DIR=" + dir + " VOL_MODE=Filesystem VOL_SIZE_BYTES=1073741824]"
}

func TestConformanceProvision(t *testing.T) {
	shared := `{"sharedFileSystemPath":"/shared"}`
	unsafePattern := func(mods ...func(*storagev1.StorageClass)) func(*testing.T) string {
		return provisioned(k3sConfig, k3sClass(append([]func(*storagev1.StorageClass){param("pathPattern", "{{ .PVName }}")}, mods...)...), claim())
	}
	checkRows(t, []row{
		{provGo + " provisionFor; " + k3sYAML, "k3s's class (defaultVolumeType local, reclaim Delete) and a ReadWriteOnce claim on agent-0: a local PV at <storage>/<pv>_<ns>_<claim>, pinned by hostname, the node in an annotation, Filesystem, the claim's size and modes",
			provisioned(k3sConfig, k3sClass(), claim()), k3sPV, ""},
		{provGo + " provisionFor, createHelperPod; " + k3sYAML, "its helper pod: the template named helper-pod-create-<pv>, in the provisioner's namespace, on the node, as its service account, run once, tolerating disk pressure, the parent directory and the scripts mounted, setup run with the VOL_* variables and arguments; deleted when done",
			helperOf(k3sConfig, k3sHelper, false, k3sClass(), claim(), false), helperPod("create", "agent-0", "setup", dir) + "; 0 left", ""},
		{provGo + " provisionFor (defaultVolumeType)", "a class without defaultVolumeType: hostPath, DirectoryOrCreate",
			provisioned(k3sConfig, k3sClass(func(c *storagev1.StorageClass) { c.Annotations = nil }), claim()),
			strings.Replace(k3sPV, "local "+dir, "hostPath "+dir+" DirectoryOrCreate", 1), ""},
		{provGo + " provisionFor, createPersistentVolumeSource", "the claim's volumeType annotation beats the class's, in any case",
			func(t *testing.T) string {
				ann := func(v string) func(*corev1.PersistentVolumeClaim) {
					return func(c *corev1.PersistentVolumeClaim) { c.Annotations = map[string]string{"volumeType": v} }
				}
				src := func(s string) string { return strings.SplitN(strings.SplitN(s, ": ", 2)[1], ";", 2)[0] }
				return src(provisioned(k3sConfig, k3sClass(), claim(ann("HostPath")))(t)) + " | " +
					src(provisioned(k3sConfig, k3sClass(func(c *storagev1.StorageClass) { c.Annotations = nil }), claim(ann("LOCAL")))(t))
			}, "hostPath " + dir + " DirectoryOrCreate | local " + dir, ""},
		{provGo + " createPersistentVolumeSource", "a volume type neither local nor hostPath: refused, its name in quotes as given, after the helper pod made the directory",
			func(t *testing.T) string {
				c := newCluster(t, k3sConfig, k3sHelper, false)
				out := c.provision(t, k3sClass(func(c *storagev1.StorageClass) { c.Annotations["defaultVolumeType"] = `n"fs` }), claim(), false)
				return fmt.Sprintf("%s; helpers %v", out, c.helperNames())
			}, `refused: failed to create persistent volume source: "n"fs" is not a recognised volume type; helpers [helper-pod-create-pvc-123]`, ""},
		{provGo + " provisionFor", "no selected node (a class with Immediate binding): refused",
			func(t *testing.T) string {
				return newCluster(t, k3sConfig, k3sHelper, false).provision(t, k3sClass(), claim(), true)
			}, "refused: configuration error, no node was specified", ""},
		{provGo + " provisionFor", "ReadWriteMany or ReadOnlyMany on node paths: refused; ReadWriteOncePod taken",
			func(t *testing.T) string {
				var out []string
				for _, m := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadOnlyMany, corev1.ReadWriteOncePod} {
					out = append(out, provisioned(k3sConfig, k3sClass(), claim(accessModes(corev1.ReadWriteOnce, m)))(t))
				}
				return strings.Join(out, " | ")
			}, "refused: NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes | refused: NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes | " +
				strings.Replace(k3sPV, "[ReadWriteOnce]", "[ReadWriteOnce ReadWriteOncePod]", 1), ""},
		{provGo + " provisionFor", "a claim with a selector on node paths: refused",
			provisioned(k3sConfig, k3sClass(), claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{} })),
			"refused: claim.Spec.Selector is not supported", ""},
		{provGo + " provisionFor (*pvc.Spec.VolumeMode)", "a claim without volumeMode (the API server always sets one): panics",
			provisioned(k3sConfig, k3sClass(), claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = nil })),
			"panic: runtime error: invalid memory address or nil pointer dereference", ""},
		{libVol + " BlockProvisioner, Qualifier, DeletionGuard; " + lib + " canProvision", "upstream implements none of the library's optional interfaces: a Block claim is refused by the library, and every claim and released PV of the provisioner's goes to it",
			func(t *testing.T) string {
				p := any(newCluster(t, k3sConfig, k3sHelper, false).p)
				_, block := p.(pvController.BlockProvisioner)
				_, qual := p.(pvController.Qualifier)
				_, guard := p.(pvController.DeletionGuard)
				return fmt.Sprintf("block %v, qualifier %v, deletion guard %v", block, qual, guard)
			}, "block false, qualifier false, deletion guard false", ""},
		{provGo + " getPathOnNode", "the class's nodePath parameter, when the node has it: that path; one it does not have: refused",
			func(t *testing.T) string {
				cfg := nodePaths(`{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["` + storage + `","/fast"]}`)
				return provisioned(cfg, k3sClass(param("nodePath", "/fast")), claim())(t) + " | " + provisioned(k3sConfig, k3sClass(param("nodePath", "/elsewhere")), claim())(t)
			}, strings.ReplaceAll(k3sPV, storage, "/fast") + " | refused: config doesn't contain path /elsewhere on node agent-0", ""},
		{provGo + " getPathOnNode", "a node of its own in nodePathMap: its paths, not the default's",
			provisioned(nodePaths(`{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["`+storage+`"]},{"node":"agent-0","paths":["/mine"]}`), k3sClass(), claim()),
			strings.ReplaceAll(k3sPV, storage, "/mine"), ""},
		{provGo + " getPathOnNode", "a node not listed and no DEFAULT_PATH_FOR_NON_LISTED_NODES: refused",
			provisioned(nodePaths(`{"node":"agent-1","paths":["/x"]}`), k3sClass(), claim()),
			"refused: config doesn't contain node agent-0, and no DEFAULT_PATH_FOR_NON_LISTED_NODES available", ""},
		{provGo + " getPathOnNode", "a node listed with no paths: refused",
			provisioned(nodePaths(`{"node":"agent-0"},{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/x"]}`), k3sClass(), claim()),
			"refused: no local path available on node agent-0", ""},
		{provGo + " getPathOnNode (rand.IntN)", "several paths and no nodePath: one of them at random each time",
			func(t *testing.T) string {
				c := newCluster(t, nodePaths(`{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/a","/b"]}`), k3sHelper, false)
				seen := map[string]int{}
				for range 40 {
					out := c.provision(t, k3sClass(), claim(), false)
					seen[strings.SplitN(strings.TrimPrefix(out, "pvc-123: local "), "/pvc-123", 2)[0]]++
				}
				var paths []string
				for p := range seen {
					paths = append(paths, p)
				}
				sort.Strings(paths)
				return fmt.Sprint(paths)
			}, "[/a /b]", ""},
		{provGo + " pathFromPattern", "a pathPattern under {{ .PVC.Namespace }}/{{ .PVC.Name }}/: the folder it gives",
			provisioned(k3sConfig, k3sClass(param("pathPattern", "{{ .PVC.Namespace }}/{{ .PVC.Name }}/{{ .PVName }}")), claim()),
			strings.Replace(k3sPV, dir, storage+"/job/disk/pvc-123", 1), ""},
		{provGo + " pathFromPattern", "a pathPattern outside <namespace>/<claim>/: refused", unsafePattern(),
			"refused: failed to create path from pattern {{ .PVName }}: pathPattern must start with {{ .PVC.Namespace }}/{{ .PVC.Name }}/: pvc-123", ""},
		{provGo + " provisionFor (filepath.IsLocal)", "a pathPattern that climbs out of the storage path through <namespace>/<claim>/..: refused",
			provisioned(k3sConfig, k3sClass(param("pathPattern", "{{ .PVC.Namespace }}/{{ .PVC.Name }}/../../../x")), claim()),
			"refused: folder path contains invalid references: job/disk/../../../x", ""},
		{provGo + " provisionFor", "allowUnsafePathPattern true, as a parameter or (if no parameter) an annotation: any pattern, even one out of the storage path",
			func(t *testing.T) string {
				ann := func(c *storagev1.StorageClass) { c.Annotations["allowUnsafePathPattern"] = "true" }
				climb := provisioned(k3sConfig, k3sClass(param("pathPattern", "../x"), param("allowUnsafePathPattern", "true")), claim())(t)
				return unsafePattern(param("allowUnsafePathPattern", "true"))(t) + " | " + unsafePattern(ann)(t) + " | " + strings.SplitN(climb, ";", 2)[0]
			}, strings.Replace(k3sPV, dir, storage+"/pvc-123", 1) + " | " + strings.Replace(k3sPV, dir, storage+"/pvc-123", 1) +
				" | pvc-123: local /var/lib/rancher/k3s/x", ""},
		{provGo + " provisionFor", "allowUnsafePathPattern false as a parameter beats true as an annotation; one that is not a bool is false",
			func(t *testing.T) string {
				ann := func(c *storagev1.StorageClass) { c.Annotations["allowUnsafePathPattern"] = "true" }
				return unsafePattern(param("allowUnsafePathPattern", "false"), ann)(t) + " | " + unsafePattern(param("allowUnsafePathPattern", "yes"), ann)(t)
			}, "refused: failed to create path from pattern {{ .PVName }}: pathPattern must start with {{ .PVC.Namespace }}/{{ .PVC.Name }}/: pvc-123 | " +
				"refused: failed to create path from pattern {{ .PVName }}: pathPattern must start with {{ .PVC.Namespace }}/{{ .PVC.Name }}/: pvc-123", ""},
		{provGo + " pathFromPattern", "a pathPattern that is not a template: refused",
			provisioned(k3sConfig, k3sClass(param("pathPattern", "{{ .Nope")), claim()),
			"refused: failed to create path from pattern {{ .Nope: template: pathPattern:1: unclosed action", ""},
		{provGo + " provisionFor (nodeAffinityKey)", "a nodeAffinityKey parameter: that label's value on the node; a label the node lacks: the node's name",
			func(t *testing.T) string {
				aff := func(s string) string { return strings.SplitN(strings.SplitN(s, "; ", 2)[1], ";", 2)[0] }
				return aff(provisioned(k3sConfig, k3sClass(param("nodeAffinityKey", "example.com/rack")), claim())(t)) + " | " +
					aff(provisioned(k3sConfig, k3sClass(param("nodeAffinityKey", "example.com/none")), claim())(t))
			}, "affinity example.com/rack In [r7] | affinity example.com/none In [agent-0]", ""},
		{provGo + " provisionFor, isSharedFilesystem", "sharedFileSystemPath: any access mode, no node needed, a PV without affinity whose annotation names no node, a helper pod on no node in particular",
			func(t *testing.T) string {
				pvc := claim(accessModes(corev1.ReadWriteMany))
				return newCluster(t, shared, k3sHelper, false).provision(t, k3sClass(), pvc, true) + " | " + helperOf(shared, k3sHelper, false, k3sClass(), pvc, true)(t)
			}, "pvc-123: local /shared/pvc-123_job_disk; no affinity; reclaim Delete; mode Filesystem; capacity 1Gi; access [ReadWriteMany]; annotations map[local.path.provisioner/selected-node:] | " +
				helperPod("create", "", "setup", "/shared/pvc-123_job_disk") + "; 0 left", ""},
		{provGo + " provisionFor, createHelperPod", "sharedFileSystemPath with a selected node: the annotation and the helper pod name it, still no affinity",
			func(t *testing.T) string {
				pv := provisioned(shared, k3sClass(), claim())(t)
				return pv[strings.Index(pv, "; ")+2:strings.Index(pv, "; reclaim")] + ", " + pv[strings.Index(pv, "annotations"):] + " | " +
					strings.SplitN(helperOf(shared, k3sHelper, false, k3sClass(), claim(), false)(t), " as ", 2)[0]
			}, "no affinity, annotations map[local.path.provisioner/selected-node:agent-0] | kube-system/helper-pod-create-pvc-123 on \"agent-0\"", ""},
		{provGo + " provisionFor, isSharedFilesystem", "both nodePathMap and sharedFileSystemPath, or neither: each volume refused",
			func(t *testing.T) string {
				return provisioned(`{"nodePathMap":[{"node":"a","paths":["/x"]}],"sharedFileSystemPath":"/s"}`, k3sClass(), claim())(t) + " | " + provisioned(`{}`, k3sClass(), claim())(t)
			}, "refused: both nodePathMap and sharedFileSystemPath are defined. Please make sure only one is in use | refused: both nodePathMap and sharedFileSystemPath are unconfigured", ""},
		{provGo + " createHelperPod", "sharedFileSystemPath / (the volume's parent is /): refused", provisioned(`{"sharedFileSystemPath":"/"}`, k3sClass(), claim()),
			"refused: failed to create volume pvc-123: invalid path create for /pvc-123_job_disk: cannot find parent dir or volume dir or parent dir is relative", ""},
		{provGo + " createHelperPod", "a relative sharedFileSystemPath: refused", provisioned(`{"sharedFileSystemPath":"rel"}`, k3sClass(), claim()),
			"refused: failed to create volume pvc-123: volume path rel/pvc-123_job_disk is not absolute", ""},
		{provGo + " pickConfig", "storageClassConfigs: the claim's class's config; a class it does not list: refused",
			func(t *testing.T) string {
				cfg := `{"storageClassConfigs":{"local-path":{"nodePathMap":[{"node":"agent-0","paths":["/lp"]}]}}}`
				return provisioned(cfg, k3sClass(), claim())(t) + " | " + provisioned(cfg, k3sClass(func(c *storagev1.StorageClass) { c.Name = "fast" }), claim())(t)
			}, strings.ReplaceAll(k3sPV, storage, "/lp") + " | refused: BUG: Got request for unexpected storage class fast", ""},
		{provGo + " provisionFor, createHelperPod", "setupCommand: the helper runs it, and only teardown is mounted from the ConfigMap; with teardownCommand too, no script volume",
			func(t *testing.T) string {
				one := helperOf(`{"setupCommand":"/bin/setup","nodePathMap":[{"node":"agent-0","paths":["/x"]}]}`, k3sHelper, false, k3sClass(), claim(), false)(t)
				both := helperOf(`{"setupCommand":"/bin/setup","teardownCommand":"/bin/td","nodePathMap":[{"node":"agent-0","paths":["/x"]}]}`, k3sHelper, false, k3sClass(), claim(), false)(t)
				cut := func(s string) string { return s[strings.Index(s, "volumes"):strings.Index(s, " args")] }
				return cut(one) + " | " + cut(both)
			}, "volumes [data hostPath /x/ DirectoryOrCreate script configMap local-path-config [teardown→teardown]]; helper-pod rancher/mirrored-library-busybox:1.37.0 mounts [script /script data /x/] command [/bin/setup] | " +
				"volumes [data hostPath /x/ DirectoryOrCreate]; helper-pod rancher/mirrored-library-busybox:1.37.0 mounts [data /x/] command [/bin/setup]", ""},
		{provGo + " createHelperPod", "a template's own tolerations and env are kept, the VOL_* variables after its",
			func(t *testing.T) string {
				tpl := k3sHelper + "\n    env:\n    - name: A\n      value: b\n  tolerations:\n  - operator: Exists\n"
				out := helperOf(k3sConfig, tpl, false, k3sClass(), claim(), false)(t)
				return out[strings.Index(out, "tolerations"):strings.Index(out, "; volumes")] + " " + out[strings.Index(out, "env ["):]
			}, "tolerations [ Exists ] env [A=b VOL_DIR=" + dir + " VOL_MODE=Filesystem VOL_SIZE_BYTES=1073741824]; 0 left", ""},
		{provGo + " createHelperPod, addVolumeMount", "an unsafe template that mounts volume data itself: its mount path is where VOL_DIR lies",
			func(t *testing.T) string {
				tpl := k3sHelper + "\n    volumeMounts:\n    - name: data\n      mountPath: /data/\n"
				out := helperOf(k3sConfig, tpl, true, k3sClass(), claim(), false)(t)
				return out[strings.Index(out, "mounts"):strings.Index(out, " command")] + " " + out[strings.Index(out, "env ["):]
			}, "mounts [data /data/ script /script] env [VOL_DIR=/data/pvc-123_job_disk VOL_MODE=Filesystem VOL_SIZE_BYTES=1073741824]; 0 left", ""},
		{provGo + " createHelperPod (HelperPodNameMaxLength)", "a helper pod name over 128 characters: cut to 128",
			func(t *testing.T) string {
				c := newCluster(t, k3sConfig, k3sHelper, false)
				long := "pvc-" + strings.Repeat("x", 200)
				if _, _, err := c.p.Provision(t.Context(), pvController.ProvisionOptions{StorageClass: k3sClass(), PVName: long, PVC: claim(), SelectedNode: c.node(t)}); err != nil {
					return err.Error()
				}
				n := c.helperNames()[0]
				return fmt.Sprintf("%d %v", len(n), n == ("helper-pod-create-" + long)[:128])
			}, "128 true", ""},
		{provGo + " createHelperPod", "a helper pod that does not succeed within cmdTimeoutSeconds: refused, the pod deleted",
			func(t *testing.T) string {
				c := newCluster(t, `{"cmdTimeoutSeconds":1,"nodePathMap":[{"node":"agent-0","paths":["/x"]}]}`, k3sHelper, false)
				c.stuck = true
				start := time.Now()
				out := c.provision(t, k3sClass(), claim(), false)
				return fmt.Sprintf("%s; %d left; waited 1 s: %v", out, c.left(t), time.Since(start) >= time.Second)
			}, "refused: failed to create volume pvc-123: create process timeout after 1 seconds; 0 left; waited 1 s: true", ""},
		{provGo + " createHelperPod (IsAlreadyExists)", "a helper pod of that name already there (a previous try's): waited for as if created",
			func(t *testing.T) string {
				old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "helper-pod-create-pvc-123"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
				c := newCluster(t, k3sConfig, k3sHelper, false, old)
				return c.provision(t, k3sClass(), claim(), false) + fmt.Sprintf("; %d left", c.left(t))
			}, k3sPV + "; 0 left", ""},
		{provGo + " refreshHelperPod (CONFIG_MOUNT_PATH unset, as k3s runs it)", "the template is read once, at start", func(t *testing.T) string {
			clearEnv(t)
			c := newCluster(t, k3sConfig, k3sHelper, false)
			err := c.p.refreshHelperPod()
			return fmt.Sprintf("%v %s", err, c.p.helperPod.Name)
		}, "<nil> helper-pod", ""},
		{provGo + " refreshHelperPod", "CONFIG_MOUNT_PATH set: $CONFIG_MOUNT_PATH/helperPod.yaml read again; one missing leaves the last; one refused leaves none, and the next volume panics",
			func(t *testing.T) string {
				clearEnv(t)
				d := t.TempDir()
				t.Setenv("CONFIG_MOUNT_PATH", d)
				c := newCluster(t, k3sConfig, k3sHelper, false)
				var out []string
				out = append(out, strings.ReplaceAll(fmt.Sprint(c.p.refreshHelperPod(), " ", c.p.helperPod.Name), d, "$DIR"))
				if err := os.WriteFile(filepath.Join(d, "helperPod.yaml"), []byte(strings.Replace(k3sHelper, "name: helper-pod\n", "name: renewed\n", 1)), 0o644); err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprint(c.p.refreshHelperPod(), " ", c.p.helperPod.Name))
				if err := os.WriteFile(filepath.Join(d, "helperPod.yaml"), []byte(k3sHelper+"\n  hostNetwork: true\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprint(c.p.refreshHelperPod(), " ", c.p.helperPod == nil))
				out = append(out, c.provision(t, k3sClass(), claim(), false))
				return strings.Join(out, " | ")
			}, "open $DIR/helperPod.yaml: no such file or directory helper-pod | <nil> renewed | helper pod template must not enable host namespaces unless allow-unsafe-helper-pod-template is enabled true | panic: runtime error: invalid memory address or nil pointer dereference", ""},
		{provGo + " Provision; " + lib + " shouldProvision, provisionClaimOperation; " + k3sYAML + " (WaitForFirstConsumer)", "through the library: a claim of k3s's class once the scheduler picked its node: a PV named pvc-<claim UID>, marked as this provisioner's, bound to the claim; one whose node is not picked yet waits",
			libraryProvisions, "[pvc-0d1e: local " + storage + "/pvc-0d1e_job_disk, provisioned-by rancher.io/local-path, claim job/disk]; helpers [helper-pod-create-pvc-0d1e]", ""},
	})
}

// k3sPVObject is the PV Provision made for k3s's class, as the library
// stores it: its class named.
func k3sPVObject(t *testing.T, c *cluster) *corev1.PersistentVolume {
	t.Helper()
	pv, _, err := c.p.Provision(t.Context(), pvController.ProvisionOptions{StorageClass: k3sClass(), PVName: "pvc-123", PVC: claim(), SelectedNode: c.node(t)})
	if err != nil {
		t.Fatal(err)
	}
	pv.Spec.StorageClassName = "local-path"
	c.mu.Lock()
	c.helpers = nil
	c.mu.Unlock()
	return pv
}

// deleted deletes k3s's PV, changed by mod, on a cluster with configJSON,
// and says what came of it: the error, and the helper pods.
func deleted(configJSON string, mod func(*corev1.PersistentVolume), setup func(*testing.T, *cluster)) func(*testing.T) string {
	return func(t *testing.T) string {
		c := newCluster(t, k3sConfig, k3sHelper, false)
		pv := k3sPVObject(t, c)
		if configJSON != k3sConfig {
			c = newCluster(t, configJSON, k3sHelper, false)
		}
		if mod != nil {
			mod(pv)
		}
		if setup != nil {
			setup(t, c)
		}
		var err error
		if p := panicked(func() { err = c.p.Delete(t.Context(), pv) }); p != "" {
			return p
		}
		var pods []string
		c.mu.Lock()
		for _, h := range c.helpers {
			pods = append(pods, describePod(h))
		}
		c.mu.Unlock()
		return fmt.Sprintf("%v; helpers %v; %d left", err, pods, c.left(t))
	}
}

func TestConformanceDelete(t *testing.T) {
	retain := func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	checkRows(t, []row{
		{provGo + " deleteFor, createHelperPod", "k3s's PV: teardown in a helper pod on its node (helper-pod-delete-<pv>), deleted when done",
			deleted(k3sConfig, nil, nil), "<nil>; helpers [" + helperPod("delete", "agent-0", "teardown", dir) + "]; 0 left", ""},
		{provGo + " deleteFor", "a PV of reclaim policy Retain: kept, no helper pod", deleted(k3sConfig, retain, nil), "<nil>; helpers []; 0 left", ""},
		{provGo + " deleteFor, getPathAndNodeForPV", "a Retain PV is still read first: one with no path is refused",
			deleted(k3sConfig, func(pv *corev1.PersistentVolume) { retain(pv); pv.Spec.Local = nil }, nil),
			"failed to delete volume pvc-123: failed to delete volume pvc-123: no path set; helpers []; 0 left", ""},
		{provGo + " deleteFor", "a PV whose node is gone: nothing to clean, success", deleted(k3sConfig, nil, func(t *testing.T, c *cluster) {
			if err := c.cs.CoreV1().Nodes().Delete(t.Context(), "agent-0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}), "<nil>; helpers []; 0 left", ""},
		{provGo + " getPathAndNodeForPV", "a PV with both hostPath and local, or neither: refused, said twice",
			func(t *testing.T) string {
				return deleted(k3sConfig, func(pv *corev1.PersistentVolume) { pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/x"} }, nil)(t) + " | " +
					deleted(k3sConfig, func(pv *corev1.PersistentVolume) { pv.Spec.Local = nil }, nil)(t)
			}, "failed to delete volume pvc-123: failed to delete volume pvc-123: no path set; helpers []; 0 left | failed to delete volume pvc-123: failed to delete volume pvc-123: no path set; helpers []; 0 left", ""},
		{provGo + " getPathAndNodeForPV", "a hostPath PV: its path", deleted(k3sConfig, func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.Local = &corev1.HostPathVolumeSource{Path: pv.Spec.Local.Path}, nil
		}, nil), "<nil>; helpers [" + helperPod("delete", "agent-0", "teardown", dir) + "]; 0 left", ""},
		{provGo + " getPathAndNodeForPV", "node paths and a PV without NodeAffinity, without Required, with an In of two values, or with no In: refused",
			func(t *testing.T) string {
				var out []string
				for _, m := range []func(*corev1.PersistentVolume){
					func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nil },
					func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity.Required = nil },
					func(pv *corev1.PersistentVolume) {
						e := &pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
						e.Values = append(e.Values, "agent-1")
					},
					func(pv *corev1.PersistentVolume) {
						pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Operator = corev1.NodeSelectorOpNotIn
					},
				} {
					out = append(out, strings.SplitN(deleted(k3sConfig, m, nil)(t), ";", 2)[0])
				}
				return strings.Join(out, " | ")
			}, "failed to delete volume pvc-123: failed to delete volume pvc-123: no NodeAffinity set | failed to delete volume pvc-123: failed to delete volume pvc-123: no NodeAffinity.Required set | " +
				"failed to delete volume pvc-123: failed to delete volume pvc-123: multiple values for the node affinity | failed to delete volume pvc-123: failed to delete volume pvc-123: cannot find affinited node", ""},
		{provGo + " getPathAndNodeForPV", "the first In of any term names the node",
			deleted(k3sConfig, func(pv *corev1.PersistentVolume) {
				r := pv.Spec.NodeAffinity.Required
				r.NodeSelectorTerms = append([]corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpExists}}}}, r.NodeSelectorTerms...)
			}, nil), "<nil>; helpers [" + helperPod("delete", "agent-0", "teardown", dir) + "]; 0 left", ""},
		{provGo + " getPathAndNodeForPV, deleteFor", "a PV of a class on a shared file system: teardown on no node in particular, its affinity unread",
			deleted(`{"sharedFileSystemPath":"/shared"}`, func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nil }, nil),
			"<nil>; helpers [" + helperPod("delete", "", "teardown", dir) + "]; 0 left", ""},
		{provGo + " deleteFor (*pv.Spec.VolumeMode)", "a PV without volumeMode (the API server always sets one): panics",
			deleted(k3sConfig, func(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = nil }, nil), "panic: runtime error: invalid memory address or nil pointer dereference", ""},
		{provGo + " deleteFor, createHelperPod", "a teardown that does not succeed within cmdTimeoutSeconds: refused, said twice, the pod deleted",
			func(t *testing.T) string {
				c := newCluster(t, `{"cmdTimeoutSeconds":1,"nodePathMap":[{"node":"agent-0","paths":["/x"]}]}`, k3sHelper, false)
				pv := k3sPVObject(t, c)
				c.stuck = true
				return fmt.Sprintf("%v; %d left", c.p.Delete(t.Context(), pv), c.left(t))
			}, "failed to delete volume pvc-123: failed to delete volume pvc-123: create process timeout after 1 seconds; 0 left", ""},
		{provGo + " pickConfig", "a PV of a class storageClassConfigs does not list: refused",
			deleted(`{"storageClassConfigs":{"fast":{"sharedFileSystemPath":"/s"}}}`, nil, nil), "BUG: Got request for unexpected storage class local-path; helpers []; 0 left", ""},
		{provGo + " deleteFor; " + lib + " syncVolume, isProvisionerForVolume, shouldDelete, deleteVolumeOperation", "through the library: a released PV of the provisioner's with policy Delete is torn down and removed; one with Retain, and one another provisioner made, are left alone",
			libraryDeletes, "left [pvc-kept pvc-theirs]; helpers [helper-pod-delete-pvc-ours]", ""},
	})
}

// runLibrary runs the library's controller, as start does, on c until
// done says so (or 30 s).
func runLibrary(t *testing.T, c *cluster, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pc := pvController.NewProvisionController(ctx, c.cs, "rancher.io/local-path", c.p, pvController.LeaderElection(false))
	go pc.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Error("the library did not finish in 30 s")
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func libraryDeletes(t *testing.T) string {
	c := newCluster(t, k3sConfig, k3sHelper, false)
	pv := k3sPVObject(t, c)
	for _, v := range []struct {
		name, by string
		policy   corev1.PersistentVolumeReclaimPolicy
	}{
		{"pvc-ours", "rancher.io/local-path", corev1.PersistentVolumeReclaimDelete},
		{"pvc-kept", "rancher.io/local-path", corev1.PersistentVolumeReclaimRetain},
		{"pvc-theirs", "example.com/other", corev1.PersistentVolumeReclaimDelete},
	} {
		p := pv.DeepCopy()
		p.Name = v.name
		p.Annotations["pv.kubernetes.io/provisioned-by"] = v.by
		p.Spec.PersistentVolumeReclaimPolicy = v.policy
		p.Status.Phase = corev1.VolumeReleased
		if _, err := c.cs.CoreV1().PersistentVolumes().Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names := func() []string {
		pvs, err := c.cs.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, p := range pvs.Items {
			n = append(n, p.Name)
		}
		sort.Strings(n)
		return n
	}
	runLibrary(t, c, func() bool {
		if slices.Contains(names(), "pvc-ours") {
			return false
		}
		time.Sleep(time.Second) // the others' turns, had they any
		return true
	})
	return fmt.Sprintf("left %v; helpers %v", names(), c.helperNames())
}

func libraryProvisions(t *testing.T) string {
	pvc := claim(func(p *corev1.PersistentVolumeClaim) {
		p.UID = "0d1e"
		p.Annotations = map[string]string{"volume.kubernetes.io/storage-provisioner": "rancher.io/local-path", "volume.kubernetes.io/selected-node": "agent-0"}
	})
	waiting := claim(func(p *corev1.PersistentVolumeClaim) {
		p.Name, p.UID = "later", "1a7e"
		p.Annotations = map[string]string{"volume.kubernetes.io/storage-provisioner": "rancher.io/local-path"}
	})
	c := newCluster(t, k3sConfig, k3sHelper, false, k3sClass(), pvc, waiting)
	var pvs *corev1.PersistentVolumeList
	runLibrary(t, c, func() bool {
		var err error
		if pvs, err = c.cs.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(pvs.Items) == 0 {
			return false
		}
		time.Sleep(time.Second) // the waiting claim's turn, had it one
		pvs, err = c.cs.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	var out []string
	for _, pv := range pvs.Items {
		ref, path := "none", "no local path"
		if r := pv.Spec.ClaimRef; r != nil {
			ref = r.Namespace + "/" + r.Name
		}
		if pv.Spec.Local != nil {
			path = pv.Spec.Local.Path
		}
		out = append(out, fmt.Sprintf("%s: local %s, provisioned-by %s, claim %s", pv.Name, path, pv.Annotations["pv.kubernetes.io/provisioned-by"], ref))
	}
	return fmt.Sprintf("%v; helpers %v", out, c.helperNames())
}
