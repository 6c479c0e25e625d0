// Package lanes runs a test package's long tests a few at a time in a chosen order
// (longest first), so that the package's wall time is close to the sum of its long
// tests divided by the lanes rather than their sum, and no long test is left to start
// last and run alone.
//
// Go's testing package runs the tests that call t.Parallel side by side once the
// sequential ones are done, up to -parallel at a time, but in no particular order.
// A Scheduler takes that order over: every marked test registers while the sequential
// tests run (before its t.Parallel), and once released waits for a lane, the lanes
// being handed out in the order the Scheduler was given. That needs -parallel at least
// the number of marked tests, so that every one of them reaches the Scheduler; a
// Scheduler of no limit (New(0, ...)) serves a run whose -parallel was chosen by hand.
package lanes

import (
	"slices"
	"sync"
)

// Scheduler hands out a fixed number of lanes to registered tests in rank order.
type Scheduler struct {
	mu      sync.Mutex
	changed *sync.Cond
	free    int
	rank    map[string]int
	// waiting holds the registered tests that have no lane yet, in the order they
	// will get one.
	waiting []string
}

// New returns a Scheduler of n lanes that hands them out to the names in order first
// (a name's position is its rank) and then to any other name in the order it
// registered. n <= 0 means no limit: every test gets a lane as soon as it asks.
func New(n int, order []string) *Scheduler {
	s := &Scheduler{free: n, rank: map[string]int{}}
	if n <= 0 {
		s.free = -1
	}
	s.changed = sync.NewCond(&s.mu)
	for i, name := range order {
		s.rank[name] = i
	}
	return s
}

// Register puts name in the queue; a test must register before it can Acquire, and
// every registered test must Acquire once (or the tests behind it wait for ever).
func (s *Scheduler) Register(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rankOf(name)
	// After every name of the same or a better rank: unranked names keep their order.
	i := len(s.waiting)
	for i > 0 && s.rankOf(s.waiting[i-1]) > r {
		i--
	}
	s.waiting = slices.Insert(s.waiting, i, name)
}

func (s *Scheduler) rankOf(name string) int {
	if r, ok := s.rank[name]; ok {
		return r
	}
	return len(s.rank)
}

// Acquire blocks until name is first in the queue and a lane is free, takes the lane
// and returns the function that gives it back.
func (s *Scheduler) Acquire(name string) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free < 0 {
		s.waiting = slices.DeleteFunc(s.waiting, func(w string) bool { return w == name })
		return func() {}
	}
	for s.free == 0 || len(s.waiting) == 0 || s.waiting[0] != name {
		s.changed.Wait()
	}
	s.waiting = s.waiting[1:]
	s.free--
	s.changed.Broadcast()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.free++
			s.changed.Broadcast()
			s.mu.Unlock()
		})
	}
}
