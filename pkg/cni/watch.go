package cni

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// listWatch adapts a pair of calls of client to a ListerWatcher. The
// reflector learns from client whether it can stream a watch-list: a fake
// clientset (tests) cannot, and an informer over it would otherwise wait
// for the stream's end forever and never sync.
func listWatch(client any, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}, client)
}

// watchUntil keeps an informer cache of lw's objects and re-evaluates check
// on every change until it reports done, returns an error, or ctx ends.
// Nothing polls: a wait that cannot succeed costs one idle watch.
func watchUntil(ctx context.Context, lw cache.ListerWatcher, objType runtime.Object, check func(objs []any) (bool, error)) error {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    objType,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			UpdateFunc: func(any, any) { poke() },
			DeleteFunc: func(any) { poke() },
		},
	})
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	go ctrl.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ictx.Done(), ctrl.HasSynced) {
		return fmt.Errorf("listing %T: %w", objType, context.Cause(ctx))
	}
	for {
		done, err := check(store.List())
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-changed:
		}
	}
}
