package main

import "strings"

// k3sFlags keeps the flags the stand-in acts on; every other k3s flag is
// accepted and ignored so k3d can pass whatever it passes to real k3s.
type k3sFlags struct {
	tlsSANs    []string
	nodeLabels []string
	nodeName   string
	httpsPort  string
	token      string
	server     string
	ignored    []string
}

// parseFlags accepts --flag=value, --flag value and bare boolean flags.
// k3s server/agent take no positional arguments, so a non-dash word after a
// flag is that flag's value.
func parseFlags(args []string) k3sFlags {
	var f k3sFlags
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			f.ignored = append(f.ignored, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			value, hasValue = args[i+1], true
			i++
		}
		switch name {
		case "tls-san":
			f.tlsSANs = append(f.tlsSANs, splitList(value)...)
		case "node-label":
			f.nodeLabels = append(f.nodeLabels, value)
		case "node-name":
			f.nodeName = value
		case "https-listen-port":
			f.httpsPort = value
		case "token", "t":
			f.token = value
		case "server", "s":
			f.server = value
		default:
			f.ignored = append(f.ignored, a)
		}
	}
	return f
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// labels turns --node-label key=value items into a map (a bare key gets "").
func (f k3sFlags) labels() map[string]string {
	m := map[string]string{}
	for _, l := range f.nodeLabels {
		for _, kv := range splitList(l) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
	}
	return m
}
