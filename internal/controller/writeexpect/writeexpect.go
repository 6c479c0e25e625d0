// Package writeexpect remembers, per key, the objects a controller created or
// deleted that its informer has not shown yet. A controller that syncs on an
// informer view older than its own writes would create them a second time (or
// miss a deletion), so it waits until the view has caught up, or until a timeout
// says the write will never be seen (another writer undid it). Unlike
// util.Expectations, which counts what the event handlers report, it asks the
// informer by name, for controllers that know the names they wrote.
package writeexpect

import (
	"sync"
	"time"
)

// Tracker is safe for concurrent use by a controller's workers.
type Tracker struct {
	timeout time.Duration

	mu      sync.Mutex
	pending map[string]*writes
}

type writes struct {
	created, deleted map[string]bool
	since            time.Time
}

// New returns a Tracker that forgets a key's writes after timeout.
func New(timeout time.Duration) *Tracker {
	return &Tracker{timeout: timeout, pending: map[string]*writes{}}
}

// Expect records the names a sync of key just created and deleted, replacing
// what the key's previous sync recorded.
func (t *Tracker) Expect(key string, created, deleted []string) {
	if len(created)+len(deleted) == 0 {
		return
	}
	w := &writes{created: map[string]bool{}, deleted: map[string]bool{}, since: time.Now()}
	for _, n := range created {
		w.created[n] = true
	}
	for _, n := range deleted {
		w.deleted[n] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[key] = w
}

// Observed reports whether the informer shows every write recorded for key;
// inInformer says whether it holds an object of that name. Once it does (or the
// timeout passed) the key's record is dropped.
func (t *Tracker) Observed(key string, inInformer func(name string) bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.pending[key]
	if w == nil {
		return true
	}
	if time.Since(w.since) > t.timeout {
		delete(t.pending, key)
		return true
	}
	for n := range w.created {
		if inInformer(n) {
			delete(w.created, n)
		}
	}
	for n := range w.deleted {
		if !inInformer(n) {
			delete(w.deleted, n)
		}
	}
	if len(w.created)+len(w.deleted) == 0 {
		delete(t.pending, key)
		return true
	}
	return false
}
