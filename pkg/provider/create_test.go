package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A create cut short by its own bound names waitTimeout; one the caller
// interrupted, or one that failed for another reason, keeps k3d's error as
// it is.
func TestOverranNamesWaitTimeout(t *testing.T) {
	k3dErr := errors.New(`Failed to copy content to container 'x': Put "http://docker/archive": context deadline exceeded`)

	parent := context.Background()
	expired, cancel := context.WithTimeout(parent, time.Nanosecond)
	defer cancel()
	<-expired.Done()
	got := overran(parent, expired, 90*time.Second, k3dErr)
	if !strings.Contains(got.Error(), "not created within waitTimeout 1m30s (--wait-timeout") || !errors.Is(got, k3dErr) {
		t.Errorf("create past its bound: %v; want waitTimeout 1m30s named, wrapping k3d's error", got)
	}

	live, cancelLive := context.WithCancel(parent)
	defer cancelLive()
	if got := overran(parent, live, time.Minute, k3dErr); got != k3dErr {
		t.Errorf("create that failed within its bound: %v, want k3d's error alone", got)
	}

	interrupted, interrupt := context.WithCancel(parent)
	inner, cancelInner := context.WithTimeout(interrupted, time.Nanosecond)
	defer cancelInner()
	interrupt()
	<-inner.Done()
	if got := overran(interrupted, inner, time.Minute, k3dErr); got != k3dErr {
		t.Errorf("interrupted create: %v, want k3d's error alone", got)
	}
}
