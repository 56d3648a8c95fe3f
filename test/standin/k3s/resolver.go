package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"time"
)

// newDialer resolves names through Docker's embedded DNS even after k3d's
// DNS fix: that fix points /etc/resolv.conf at the network gateway and
// relies on iptables rules rewritten with the real iptables-save/-restore,
// which the stand-in image lacks. The fix keeps the original file as
// /etc/resolv.conf.original; its nameserver still answers.
func newDialer() *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	ns := originalNameserver("/etc/resolv.conf.original")
	if ns == "" {
		return d
	}
	d.Resolver = &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, net.JoinHostPort(ns, "53"))
		},
	}
	return d
}

func originalNameserver(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			return fields[1]
		}
	}
	return ""
}
