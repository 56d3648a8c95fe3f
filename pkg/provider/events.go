package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// followEvents subscribes to Docker's events that match args. Docker
// answers the events request before it subscribes the caller (moby
// api/server/router/system/system_routes.go getEvents@v20.10.24 and
// @v28.5.2: WriteHeader and Flush, then SubscribeToEvents), so a subscription alone can miss
// what happens right after it returns; asking for the events since a
// moment before replays those from Docker's buffer (its last 256, moby
// daemon/events/events.go@v20.10.24) instead, and the caller
// only acts after this returns. An event seen twice is harmless to every
// caller: each re-checks with Docker.
func (p *Provider) followEvents(ctx context.Context, args ...filters.KeyValuePair) (<-chan events.Message, <-chan error) {
	since := time.Now().Add(-eventsReplay)
	return p.docker.Events(ctx, events.ListOptions{
		Since:   fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
		Filters: filters.NewArgs(args...),
	})
}

// eventsReplay is how far back followEvents asks Docker to replay: wide
// enough for a daemon whose clock is a little behind ours.
const eventsReplay = time.Second

// eventsErr says why following Docker's events under bounded, a context
// derived from parent with the bound, ended: the caller's context, the
// bound (what went on for too long), or the stream.
func eventsErr(parent, bounded context.Context, err error, what string, bound time.Duration) error {
	switch {
	case parent.Err() != nil:
		return parent.Err()
	case bounded.Err() != nil:
		return fmt.Errorf("%s after %s", what, bound)
	}
	return fmt.Errorf("following Docker's events: %w", err)
}
