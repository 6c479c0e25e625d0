package kubelet

import (
	"context"
	"sync"
)

// Priorities of the start gate: a pod that has its sandbox goes on to its containers
// before another pod gets a sandbox, so pods finish starting in the order they came.
const (
	startContainer = iota
	startSandbox
	startPriorities
)

// startGate lets a few sandbox and container starts run at a time, first come first
// served. Each start is CPU-bound work in the runtime (runc, the shim, the CNI plugins):
// when a burst of pods all start at once they share the CPU and all finish late
// together, while taking them a few at a time finishes the first ones early and the last
// no later. Image pulls are not gated.
type startGate struct {
	mu      sync.Mutex
	free    int
	waiting [startPriorities][]chan struct{}
}

func newStartGate(slots int) *startGate {
	if slots < 1 {
		slots = 1
	}
	return &startGate{free: slots}
}

// acquire waits for a slot and returns the function that gives it back, or ctx's error.
func (g *startGate) acquire(ctx context.Context, priority int) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err // a cancelled start takes no slot, even a free one
	}
	g.mu.Lock()
	if g.free > 0 && g.queued() == 0 {
		g.free--
		g.mu.Unlock()
		return g.release, nil
	}
	ready := make(chan struct{})
	g.waiting[priority] = append(g.waiting[priority], ready)
	g.mu.Unlock()
	select {
	case <-ready:
		return g.release, nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, ch := range g.waiting[priority] {
			if ch == ready {
				g.waiting[priority] = append(g.waiting[priority][:i], g.waiting[priority][i+1:]...)
				return nil, ctx.Err()
			}
		}
		// The slot was handed over as ctx ended: pass it on.
		g.handOver()
		return nil, ctx.Err()
	}
}

func (g *startGate) queued() int {
	n := 0
	for _, q := range g.waiting {
		n += len(q)
	}
	return n
}

// release gives a slot back: to the first waiter of the highest priority, if any.
func (g *startGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.handOver()
}

// handOver passes a freed slot to the next waiter or back to the pool; mu is held.
func (g *startGate) handOver() {
	for p := range g.waiting {
		if len(g.waiting[p]) > 0 {
			next := g.waiting[p][0]
			g.waiting[p] = g.waiting[p][1:]
			close(next)
			return
		}
	}
	g.free++
}
