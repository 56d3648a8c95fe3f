// Package kube connects to a lane's cluster: the Kubernetes clients one
// command run makes, once, from the lane's kubeconfig, and hands to
// everything that talks to the API server (apply, waits, status, export,
// verify, reset and the baseline up records for it).
package kube

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients are one connection to a cluster, typed and dynamic.
type Clients struct {
	// Config is the connection the clients share.
	Config  *rest.Config
	Typed   kubernetes.Interface
	Dynamic dynamic.Interface
	// Metadata lists and deletes objects of any type by their metadata
	// alone: names, UIDs, labels and finalizers, without the megabytes a
	// full list of CRDs runs to (reset and its baseline).
	Metadata metadata.Interface
	// Discovery asks the API server, uncached, which types it serves now.
	Discovery *discovery.DiscoveryClient
	// Mapper maps kinds to resources through discovery, cached for the
	// run; Reset it once new CRDs are established.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
}

// Client-side rate limit of the lane's clients. client-go's default (5
// QPS, burst 10) would throttle a lane's batches of a few dozen requests
// (a few hundred for reset's listing of every cluster-scoped type), ~200 ms
// per request beyond the tenth; the API server's own priority and fairness
// still applies.
const (
	qps   = 100
	burst = 200
)

// Connect makes the clients for the cluster of the kubeconfig file.
func Connect(kubeconfig string) (*Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return ForConfig(cfg)
}

// ForConfig makes the clients for cfg, with the lane's rate limit unless
// cfg brings a rate limiter of its own; cfg itself is left as it is.
func ForConfig(cfg *rest.Config) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.WarningHandler == nil && cfg.WarningHandlerWithContext == nil {
		// Reset and the baseline read every type generically, deprecated
		// ones too (v1 Endpoints); client-go's default handler would print
		// the API server's deprecation warning for each into the progress
		// output, about types the lane does not use.
		cfg.WarningHandler = rest.NoWarnings{}
	}
	if cfg.RateLimiter == nil {
		cfg.QPS = max(cfg.QPS, qps)
		cfg.Burst = max(cfg.Burst, burst)
	}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic Kubernetes client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating metadata Kubernetes client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	return &Clients{
		Config:    cfg,
		Typed:     typed,
		Dynamic:   dyn,
		Metadata:  md,
		Discovery: disc,
		Mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
	}, nil
}
