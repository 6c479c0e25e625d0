package scheduler

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// The apiserver's priority and fairness queues every request of the scheduler in one
// flow (the kube-scheduler FlowSchema distinguishes flows by namespace), and refuses
// with 429 and Retry-After once that flow's queues are full: six queues of 50 in the
// workload-high level, as upstream's. client-go then sleeps for Retry-After (a second,
// doubled while refusals go on) before it tries again. A scheduler placing pods
// faster than the apiserver answers their bindings, each in a goroutine of its own,
// with an Event for each in a goroutine of its own too (client-go's events library),
// had hundreds in flight: 10,000 queued pods on 5,000 nodes saw ~700 bindings refused
// and sleeping 1-2 s with the scheduler idle, the last bound at 9-17 s instead of ~7
// s. Holding the calls back here, where a slot frees as soon as an answer comes,
// keeps the flow under the apiserver's limit without slowing it.
const (
	// maxBindingsInFlight bounds the binding calls sent and not yet answered.
	maxBindingsInFlight = 100
	// maxEventWritesInFlight bounds the Event writes sent and not yet answered.
	maxEventWritesInFlight = 50
)

// slots bounds how many calls are in flight at once.
type slots chan struct{}

// acquire waits for a free slot, or for ctx to end (false).
func (s slots) acquire(ctx context.Context) bool {
	select {
	case s <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s slots) release() { <-s }

// boundedEventSink is an EventSink with at most cap(slots) writes in flight.
type boundedEventSink struct {
	events.EventSink
	slots slots
}

func newBoundedEventSink(sink events.EventSink, n int) *boundedEventSink {
	return &boundedEventSink{EventSink: sink, slots: make(slots, n)}
}

func (b *boundedEventSink) Create(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	if !b.slots.acquire(ctx) {
		return nil, ctx.Err()
	}
	defer b.slots.release()
	return b.EventSink.Create(ctx, event)
}

func (b *boundedEventSink) Update(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error) {
	if !b.slots.acquire(ctx) {
		return nil, ctx.Err()
	}
	defer b.slots.release()
	return b.EventSink.Update(ctx, event)
}

func (b *boundedEventSink) Patch(ctx context.Context, oldEvent *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if !b.slots.acquire(ctx) {
		return nil, ctx.Err()
	}
	defer b.slots.release()
	return b.EventSink.Patch(ctx, oldEvent, data)
}
