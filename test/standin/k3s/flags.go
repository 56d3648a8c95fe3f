package main

import (
	"fmt"
	"sort"
	"strings"
)

// k3sFlags are the k3s server/agent flags the stand-in knows. Like real k3s
// (urfave/cli), any other flag or a positional argument is an error, so a
// wrong flag in the product fails on the rig as it would on a real node.
type k3sFlags struct {
	role string

	// server and agent
	token         string
	nodeName      string
	nodeIPs       []string
	nodeLabels    []string
	nodeTaints    []string
	kubeletArgs   []string
	kubeProxyArgs []string
	pauseImage    string

	// agent
	server string

	// server
	tlsSANs              []string
	httpsPort            string
	disable              []string
	flannelBackend       string
	disableNetworkPolicy bool
	clusterInit          bool
	clusterCIDRs         []string
	serviceCIDRs         []string
	clusterDNS           []string
	clusterDomain        string
	apiserverArgs        []string
	controllerArgs       []string
	schedulerArgs        []string
}

type flagKind int

const (
	stringFlag flagKind = iota
	listFlag            // repeatable; values are kept in order
	boolFlag
)

type flagSpec struct {
	kind flagKind
	// serverOnly flags are refused by `k3s agent`, as real k3s does.
	serverOnly bool
	set        func(f *k3sFlags, v string) error
}

func str(p func(f *k3sFlags) *string) func(*k3sFlags, string) error {
	return func(f *k3sFlags, v string) error { *p(f) = v; return nil }
}

func list(p func(f *k3sFlags) *[]string) func(*k3sFlags, string) error {
	return func(f *k3sFlags, v string) error { *p(f) = append(*p(f), v); return nil }
}

func boolean(p func(f *k3sFlags) *bool) func(*k3sFlags, string) error {
	return func(f *k3sFlags, v string) error {
		switch v {
		case "", "true":
			*p(f) = true
		case "false":
			*p(f) = false
		default:
			return fmt.Errorf("invalid boolean value %q", v)
		}
		return nil
	}
}

// flagSpecs names every flag the stand-in accepts and what it does with it.
// Names follow k3s-io/k3s pkg/cli/cmds/{server,agent}.go@v1.35.5+k3s1; `-t`
// and `-s` are k3s's short forms of --token and --server, `-i` of --node-ip
// (k3s-io/k3s pkg/cli/cmds/agent.go@v1.35.5+k3s1).
var flagSpecs = map[string]flagSpec{
	"token":          {stringFlag, false, str(func(f *k3sFlags) *string { return &f.token })},
	"t":              {stringFlag, false, str(func(f *k3sFlags) *string { return &f.token })},
	"node-name":      {stringFlag, false, str(func(f *k3sFlags) *string { return &f.nodeName })},
	"node-ip":        {listFlag, false, list(func(f *k3sFlags) *[]string { return &f.nodeIPs })},
	"i":              {listFlag, false, list(func(f *k3sFlags) *[]string { return &f.nodeIPs })},
	"node-label":     {listFlag, false, list(func(f *k3sFlags) *[]string { return &f.nodeLabels })},
	"node-taint":     {listFlag, false, list(func(f *k3sFlags) *[]string { return &f.nodeTaints })},
	"kubelet-arg":    {listFlag, false, list(func(f *k3sFlags) *[]string { return &f.kubeletArgs })},
	"kube-proxy-arg": {listFlag, false, list(func(f *k3sFlags) *[]string { return &f.kubeProxyArgs })},
	"pause-image":    {stringFlag, false, str(func(f *k3sFlags) *string { return &f.pauseImage })},
	"server":         {stringFlag, false, str(func(f *k3sFlags) *string { return &f.server })},
	"s":              {stringFlag, false, str(func(f *k3sFlags) *string { return &f.server })},

	"tls-san":           {listFlag, true, list(func(f *k3sFlags) *[]string { return &f.tlsSANs })},
	"https-listen-port": {stringFlag, true, str(func(f *k3sFlags) *string { return &f.httpsPort })},
	"disable": {listFlag, true, func(f *k3sFlags, v string) error {
		// Any name, as k3s takes it: a misspelt one leaves its component
		// enabled, and packaged.go refuses to start with one it cannot deploy.
		// Each item trimmed, as k3s trims them (k3s-io/k3s
		// pkg/cli/server/server.go@v1.35.5+k3s1), unlike the other lists.
		for _, d := range splitList(v) {
			f.disable = append(f.disable, strings.TrimSpace(d))
		}
		return nil
	}},
	"flannel-backend": {stringFlag, true, func(f *k3sFlags, v string) error {
		// The stand-in embeds no flannel: only "none" (a CNI deployed on
		// top, the lane's case) can be honoured.
		if v != "none" {
			return fmt.Errorf("stand-in k3s runs no embedded flannel: only --flannel-backend=none is supported, got %q", v)
		}
		f.flannelBackend = v
		return nil
	}},
	"disable-network-policy":      {boolFlag, true, boolean(func(f *k3sFlags) *bool { return &f.disableNetworkPolicy })},
	"cluster-init":                {boolFlag, true, boolean(func(f *k3sFlags) *bool { return &f.clusterInit })},
	"cluster-cidr":                {listFlag, true, cidrs("cluster-cidr", func(f *k3sFlags) *[]string { return &f.clusterCIDRs })},
	"service-cidr":                {listFlag, true, cidrs("service-cidr", func(f *k3sFlags) *[]string { return &f.serviceCIDRs })},
	"cluster-dns":                 {listFlag, true, list(func(f *k3sFlags) *[]string { return &f.clusterDNS })},
	"cluster-domain":              {stringFlag, true, str(func(f *k3sFlags) *string { return &f.clusterDomain })},
	"kube-apiserver-arg":          {listFlag, true, list(func(f *k3sFlags) *[]string { return &f.apiserverArgs })},
	"kube-controller-manager-arg": {listFlag, true, list(func(f *k3sFlags) *[]string { return &f.controllerArgs })},
	"kube-scheduler-arg":          {listFlag, true, list(func(f *k3sFlags) *[]string { return &f.schedulerArgs })},
}

// cidrs takes a repeatable, comma-separated CIDR flag: k3s parses every
// item when the server starts and exits on a bad one (parseCIDRs).
func cidrs(flag string, p func(f *k3sFlags) *[]string) func(*k3sFlags, string) error {
	return func(f *k3sFlags, v string) error {
		if _, err := parseCIDRs(flag, []string{v}); err != nil {
			return err
		}
		*p(f) = append(*p(f), v)
		return nil
	}
}

// parseFlags accepts --flag=value, --flag value and bare boolean flags, for
// role "server" or "agent". Unknown flags, server flags given to an agent,
// positional arguments and missing values are errors.
func parseFlags(role string, args []string) (k3sFlags, error) {
	f := k3sFlags{role: role}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return f, fmt.Errorf("k3s %s: unexpected argument %q (k3s %s takes no positional arguments)", role, a, role)
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		spec, ok := flagSpecs[name]
		if !ok {
			return f, fmt.Errorf("k3s %s: flag provided but not defined: %s (the stand-in knows %s)", role, a, knownFlags(role))
		}
		if spec.serverOnly && role != "server" {
			return f, fmt.Errorf("k3s %s: flag provided but not defined: %s (a server-only flag)", role, a)
		}
		if spec.kind != boolFlag && !hasValue {
			if i+1 >= len(args) {
				return f, fmt.Errorf("k3s %s: flag needs an argument: %s", role, a)
			}
			i++
			value = args[i]
		}
		if err := spec.set(&f, value); err != nil {
			return f, fmt.Errorf("k3s %s: %s: %w", role, a, err)
		}
	}
	return f, nil
}

func knownFlags(role string) string {
	var names []string
	for n, s := range flagSpecs {
		if len(n) > 1 && (!s.serverOnly || role == "server") {
			names = append(names, "--"+n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// labels are the --node-label items as k3s's agent puts them on its Node
// through the API once kubelet registered it: each item split at its first
// "=" (a bare key gets ""), commas not split (k3s-io/k3s
// pkg/agent/run.go@v1.35.5+k3s1 updateMutableLabels).
func (f k3sFlags) labels() map[string]string {
	m := map[string]string{}
	for _, l := range f.nodeLabels {
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}
