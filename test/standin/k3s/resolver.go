package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// lookup resolves host with the node's /etc/resolv.conf (after k3d's DNS
// fix, the network gateway, whose port 53 the fix's iptables rules send to
// Docker's embedded DNS), and falls back to the nameserver the fix replaced
// (/etc/resolv.conf.original), which answers when the fix did not apply.
func lookup(ctx context.Context, host string) ([]string, error) {
	if net.ParseIP(host) != nil {
		return []string{host}, nil
	}
	addrs, err := net.DefaultResolver.LookupHost(ctx, host)
	if err == nil && len(addrs) > 0 {
		return addrs, nil
	}
	ns := originalNameserver("/etc/resolv.conf.original")
	if ns == "" {
		return nil, err
	}
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, network, net.JoinHostPort(ns, "53"))
		},
	}
	addrs, err2 := r.LookupHost(ctx, host)
	if err2 != nil || len(addrs) == 0 {
		return nil, fmt.Errorf("resolving %s: %v; via %s: %v", host, err, ns, err2)
	}
	return addrs, nil
}

// dialContext dials host:port after lookup.
func dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, network, net.JoinHostPort(addrs[0], port))
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
