// Command coredns is CoreDNS v1.14.3, the version k3s v1.35.5+k3s1 ships
// (k3s-io/k3s release v1.35.5+k3s1, "Embedded Component Versions"), built
// with only the plugins k3s's Corefile names (k3s-io/k3s
// manifests/coredns.yaml@v1.35.5+k3s1, read at 6a4781ad: errors, health,
// ready, kubernetes, hosts, prometheus, cache, loop, reload, loadbalance,
// forward; import is the Corefile parser's own). The rig's nodes run it as
// rancher/mirrored-coredns-coredns:1.14.3 where a lane's k3s deploys
// CoreDNS. Built as CoreDNS documents for a program of one's own ("Build
// with external golang source code", coredns.io
// 2017/07/25/compile-time-enabling-or-disabling-plugins): the plugins
// imported and dnsserver.Directives set to them, in the order of
// plugin.cfg@v1.14.3, which is the order they run in; then coremain.Run,
// as coredns.go@v1.14.3 does. The rest of upstream's plugins (cloud DNS
// backends, etcd, ...) would pull in their SDKs for nothing a lane runs;
// a Corefile naming one of them is refused at start ("Unknown directive").
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives are k3s's Corefile's plugins in plugin.cfg@v1.14.3's order
// (the metrics plugin's directive is "prometheus").
var directives = []string{
	"reload",
	"ready",
	"health",
	"prometheus",
	"errors",
	"loadbalance",
	"cache",
	"hosts",
	"kubernetes",
	"loop",
	"forward",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
