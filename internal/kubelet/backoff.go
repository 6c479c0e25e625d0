package kubelet

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// backoff is the per-container restart back-off: the first restart is immediate, then
// each restart waits initial, doubling up to max, counted from the container's exit. An
// entry idle for twice max is forgotten, so a container that ran fine for a while starts
// again from initial.
type backoff struct {
	clock   clock.PassiveClock
	initial time.Duration
	max     time.Duration
	mu      sync.Mutex
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

func newBackoff(c clock.PassiveClock, initial, max time.Duration) *backoff {
	return &backoff{clock: c, initial: initial, max: max, entries: map[string]*backoffEntry{}}
}

func (b *backoff) expired(e *backoffEntry, since time.Time) bool {
	return since.Sub(e.lastUpdate) > 2*b.max
}

// inBackoffSince reports whether a restart of key, whose last run ended at finished,
// must still wait, and how long.
func (b *backoff) inBackoffSince(key string, finished time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, finished) {
		return false, 0
	}
	left := e.delay - b.clock.Since(finished)
	return left > 0, left
}

// next records a restart of key now: the following one waits twice as long.
func (b *backoff) next(key string, finished time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, finished) {
		b.entries[key] = &backoffEntry{delay: b.initial, lastUpdate: b.clock.Now()}
		return
	}
	e.delay = min(2*e.delay, b.max)
	e.lastUpdate = b.clock.Now()
}

// delay is the current back-off of key, for the CrashLoopBackOff message.
func (b *backoff) delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return b.initial
}

// forget drops every entry whose key starts with prefix (a pod's UID).
func (b *backoff) forget(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			delete(b.entries, k)
		}
	}
}
