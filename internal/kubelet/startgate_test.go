package kubelet

import (
	"context"
	"testing"
	"time"

	"mizzen/internal/testing/poll"
)

// TestStartGateOrder holds the only slot, queues sandbox and container starts, and
// checks that container starts go first and each priority is first come first served.
func TestStartGateOrder(t *testing.T) {
	g := newStartGate(1)
	ctx := context.Background()
	release, err := g.acquire(ctx, startSandbox)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	queue := func(name string, prio int) {
		g.mu.Lock()
		n := g.queued()
		g.mu.Unlock()
		go func() {
			rel, err := g.acquire(ctx, prio)
			if err != nil {
				t.Error(err)
				return
			}
			order <- name
			rel()
		}()
		waitFor(t, name+" queued", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.queued() == n+1 })
	}
	queue("sandbox-a", startSandbox)
	queue("sandbox-b", startSandbox)
	queue("container-a", startContainer)
	queue("container-b", startContainer)
	release()
	var got []string
	for range 4 {
		got = append(got, <-order)
	}
	want := []string{"container-a", "container-b", "sandbox-a", "sandbox-b"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
	waitFor(t, "every slot back", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.free == 1 && g.queued() == 0 })
}

// TestStartGateCancel checks that a waiter whose context ends leaves the queue and
// that the slot count stays right.
func TestStartGateCancel(t *testing.T) {
	g := newStartGate(1)
	release, _ := g.acquire(context.Background(), startSandbox)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := g.acquire(ctx, startSandbox)
		done <- err
	}()
	waitFor(t, "the waiter queued", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.queued() == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("acquire after cancel returned no error")
	}
	release()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.free != 1 || g.queued() != 0 {
		t.Errorf("free %d, queued %d; want 1, 0", g.free, g.queued())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, time.Millisecond, cond)
}
