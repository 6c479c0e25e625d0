package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestBindingsInFlightAreBounded: while the apiserver does not answer bindings, the
// scheduler has at most maxBindingsInFlight of them out (the others wait their turn
// instead of filling the apiserver's queues for its flow), and binds every pod once
// answers come.
func TestBindingsInFlightAreBounded(t *testing.T) {
	client := fake.NewClientset(node("n1", 100000, 100000, withPodCapacity(500)))
	g := newGate()
	var sent atomic.Int32
	env := startSchedulerThrough(t, client, holdingClient{client, func(_, _, sub string) {
		if sub == "binding" {
			sent.Add(1)
			g.hold()
		}
	}}, nil)
	// Registered after the scheduler's own cleanup, so it runs first: the scheduler
	// waits for its bindings when it stops.
	t.Cleanup(g.release)
	total := maxBindingsInFlight + 20
	for i := range total {
		env.createPod(pod(fmt.Sprintf("p%03d", i), 10, 0))
	}
	if err := pollUntil(func() (bool, error) { return sent.Load() >= maxBindingsInFlight, nil }); err != nil {
		t.Fatalf("%d bindings sent, want %d: %v", sent.Load(), maxBindingsInFlight, err)
	}
	time.Sleep(200 * time.Millisecond) // room for any binding beyond the bound to go out
	if n := sent.Load(); n != maxBindingsInFlight {
		t.Fatalf("%d bindings in flight at once, want at most %d", n, maxBindingsInFlight)
	}
	g.release()
	for i := range total {
		env.waitScheduled("default", fmt.Sprintf("p%03d", i))
	}
}

// blockingSink is an EventSink whose writes wait for release, counting those waiting.
type blockingSink struct {
	waiting atomic.Int32
	release chan struct{}
}

func (b *blockingSink) write(e *eventsv1.Event) (*eventsv1.Event, error) {
	b.waiting.Add(1)
	<-b.release
	return e, nil
}

func (b *blockingSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return b.write(e)
}

func (b *blockingSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return b.write(e)
}

func (b *blockingSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return b.write(e)
}

// TestEventWritesInFlightAreBounded: of many Event writes at once (client-go's events
// library writes each from a goroutine of its own), at most the bound reach the sink
// before earlier ones are answered; a write whose context ends while it waits returns.
func TestEventWritesInFlightAreBounded(t *testing.T) {
	inner := &blockingSink{release: make(chan struct{})}
	sink := newBoundedEventSink(inner, 3)
	done := make(chan error, 10)
	for range 10 {
		go func() {
			_, err := sink.Create(context.Background(), &eventsv1.Event{})
			done <- err
		}()
	}
	if err := pollUntil(func() (bool, error) { return inner.waiting.Load() >= 3, nil }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := inner.waiting.Load(); n != 3 {
		t.Fatalf("%d writes reached the sink at once, want 3", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sink.Patch(ctx, &eventsv1.Event{}, nil); err == nil {
		t.Error("a write whose context ended while waiting returned no error")
	}
	close(inner.release)
	for range 10 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
