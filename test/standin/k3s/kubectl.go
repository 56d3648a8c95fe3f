package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	// Client auth plugins, as k3s's kubectl imports them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
)

// kubectl is a whole kubectl, as k3s's is: k3s-io/k3s
// pkg/kubectl/main.go@04565d3 defaults KUBECONFIG (kubectlEnv) and then
// runs k8s.io/kubectl's NewDefaultKubectlCommand in process, for argv[0]
// kubectl and for `k3s kubectl` alike (cmd/k3s/main.go@5b791c1 runs it
// with argv ["kubectl", args...] either way). Being in process matters: the
// product copies the server's /bin/k3s to the host as the lane's kubectl
// (pkg/lane kubevirtci.go), where no other file of the node image exists.
func kubectl(args []string) int {
	argv := append([]string{"kubectl"}, args...)
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
// defaults it (k3s-io/k3s pkg/kubectl/main.go@04565d3 Main, the same at
// 66e350e): when neither KUBECONFIG nor a --kubeconfig argument names one,
// KUBECONFIG becomes /etc/rancher/k3s/k3s.yaml if that exists, else
// $HOME/.kube/k3s.yaml if that exists (pkg/server HomeKubeConfig(false,
// false), pkg/datadir/datadir.go@d15f412 GlobalConfig, HomeConfig); with
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
