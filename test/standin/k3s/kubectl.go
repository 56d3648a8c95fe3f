package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	// Client auth plugins, as k3s's kubectl imports them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
)

// kubectl is a whole kubectl, as k3s's is. In k3s-io/k3s@v1.35.5+k3s1
// (read at 6a4781ad: k3s-io/k3s itself is too big to fetch),
// cmd/k3s/main.go runs `k3s kubectl` and an argv[0] of kubectl alike
// through externalCLI: it extracts the binary's data dir (stageAndRun) and
// execs the bin/kubectl there, the same multi-call binary, whose
// pkg/kubectl/main.go Main defaults KUBECONFIG (kubectlEnv) and runs
// k8s.io/kubectl's NewDefaultKubectlCommand in process; go.mod replaces
// k8s.io/kubectl with its fork's staging copy at v1.35.5-k3s1.
//
// The stand-in stages a data dir where k3s extracts one (stageDataDir),
// so a caller that leaves k3s to write /var/lib/rancher/k3s does so on the
// rig too, and runs kubectl in process from there. Its kubectl is k8s.io/kubectl v0.37.2, the module Kubernetes
// publishes from staging/src/k8s.io/kubectl, at the version of the product
// module's client-go (one module holds one k8s.io/apimachinery): against
// the rig's kube-apiserver v1.36.3 that is within kubectl's skew of one
// minor version either way (kubernetes/website
// content/en/releases/version-skew-policy.md@release-1.35, "kubectl").
func kubectl(args []string) int {
	argv := append([]string{"kubectl"}, args...)
	if _, err := stageDataDir(kubectlDataDir(os.Environ(), argv, os.Getuid() == 0), defaultDataDir); err != nil {
		// k3s's stageAndRun: "extracting data: ...", and kubectl never runs.
		fmt.Fprintf(os.Stderr, "extracting data: %v\n", err)
		return 1
	}
	env, warn := kubectlEnv(os.Environ(), argv, localKubeconfig)
	if warn != "" {
		fmt.Fprintln(os.Stderr, warn)
	}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "KUBECONFIG="); ok {
			os.Setenv("KUBECONFIG", v)
		}
	}
	os.Args = argv
	if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
		kubectlutil.CheckErr(err)
	}
	return 0
}

// kubectlEnv is env with KUBECONFIG defaulted as k3s's kubectl wrapper
// defaults it (k3s-io/k3s pkg/kubectl/main.go@v1.35.5+k3s1 Main, read at
// 6a4781ad): when neither KUBECONFIG nor a --kubeconfig argument names one,
// KUBECONFIG becomes /etc/rancher/k3s/k3s.yaml if that exists, else
// $HOME/.kube/k3s.yaml if that exists (pkg/server HomeKubeConfig(false,
// false), pkg/datadir/datadir.go@v1.35.5+k3s1 GlobalConfig, HomeConfig); with
// neither, kubectl keeps its own default. An unreadable file gets k3s's
// warning.
func kubectlEnv(env, argv []string, global string) ([]string, string) {
	kubeconfig := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "KUBECONFIG="); ok {
			kubeconfig = v
		}
	}
	for i, a := range argv {
		if strings.HasPrefix(a, "--kubeconfig=") {
			kubeconfig = strings.Split(a, "=")[1]
		} else if strings.HasPrefix(a, "--kubeconfig") && i+1 < len(argv) {
			kubeconfig = argv[i+1]
		}
	}
	if kubeconfig != "" {
		return env, ""
	}
	config := global
	if _, err := os.Stat(config); err != nil {
		home := ""
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "HOME="); ok {
				home = v
			}
		}
		config = filepath.Join(home, ".kube", "k3s.yaml")
	}
	if _, err := os.Stat(config); err == nil {
		out := []string{}
		for _, e := range env {
			if !strings.HasPrefix(e, "KUBECONFIG=") {
				out = append(out, e)
			}
		}
		env = append(out, "KUBECONFIG="+config)
	}
	warn := ""
	if f, err := os.Open(config); err != nil && os.IsPermission(err) {
		warn = fmt.Sprintf("Unable to read %s, please start server with --write-kubeconfig-mode or --write-kubeconfig-group to modify kube config permissions", config)
	} else if err == nil {
		f.Close()
	}
	return env, warn
}

// defaultDataDir is k3s's data dir for root (k3s-io/k3s
// pkg/datadir/datadir.go@v1.35.5+k3s1 DefaultDataDir, read at 6a4781ad).
const defaultDataDir = "/var/lib/rancher/k3s"

// standinAsset names the stand-in's "bindata asset": k3s names the
// extracted dir after its asset's hash (getAssetAndDir); the stand-in has
// one build.
const standinAsset = "standin"

// kubectlDataDir is the data dir k3s run as kubectl extracts into
// (k3s-io/k3s cmd/k3s/main.go@v1.35.5+k3s1 findDataDir, read at
// 6a4781ad): $K3S_DATA_DIR, else a --data-dir/-d argument, else
// /var/lib/rancher/k3s for root and $HOME/.rancher/k3s for anyone else
// (pkg/datadir/datadir.go LocalHome, pkg/util/permissions
// IsPrivileged). k3s also reads data-dir from its config file
// (/etc/rancher/k3s/config.yaml); the stand-in does not, and the product
// writes none on the host, where the lane's kubectl runs.
func kubectlDataDir(env, argv []string, root bool) string {
	get := func(k string) string {
		v := ""
		for _, e := range env {
			if x, ok := strings.CutPrefix(e, k+"="); ok {
				v = x
			}
		}
		return v
	}
	if d := get("K3S_DATA_DIR"); d != "" {
		return d
	}
	dir := ""
	fs := pflag.NewFlagSet("data-dir-set", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	fs.StringVarP(&dir, "data-dir", "d", "", "")
	_ = fs.Parse(argv)
	if dir != "" {
		return dir
	}
	if root {
		return defaultDataDir
	}
	return filepath.Join(get("HOME"), ".rancher", "k3s")
}

// stageDataDir leaves in dataDir what k3s's extract leaves before it runs
// kubectl (k3s-io/k3s cmd/k3s/main.go@v1.35.5+k3s1 extract, read at
// 6a4781ad) and returns the asset dir: data/<asset>/bin/k3s, data/current
// pointing at it, data/.lock, data/cni. As k3s does, it extracts nothing
// when the asset is in dataDir already, or in def (the root default) when
// dataDir is another. The stand-in's bin/k3s is a note, not a binary: the
// stand-in runs kubectl in process.
func stageDataDir(dataDir, def string) (string, error) {
	assetDir := func(d string) string { return filepath.Join(d, "data", standinAsset) }
	dir := assetDir(dataDir)
	if _, err := os.Stat(filepath.Join(dir, "bin", "k3s")); err == nil {
		return dir, nil
	}
	if dataDir != def {
		if _, err := os.Stat(filepath.Join(assetDir(def), "bin", "k3s")); err == nil {
			return assetDir(def), nil
		}
	}
	data := filepath.Join(dataDir, "data")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(data, ".lock"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(data, "cni"), 0o755); err != nil {
		return "", err
	}
	current := filepath.Join(data, "current")
	_ = os.Remove(current)
	if err := os.Symlink(dir, current); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "k3s"), []byte("sriov-lane stand-in k3s: kubectl runs in process\n"), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}
