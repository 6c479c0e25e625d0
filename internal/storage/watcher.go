package storage

import (
	"context"
	"errors"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// maxQueued bounds how far a watcher may fall behind before it is ended; its client
// then starts again from its last resource version, as upstream's slow watchers do.
const maxQueued = 200000

// ErrWatcherTooSlow ends a watch whose client does not keep up.
var ErrWatcherTooSlow = errors.New("the client is not reading its watch fast enough")

// Watcher is one client's view of a resource's changes. The cache appends to its queue
// without ever blocking; the client drains it with Next.
type Watcher struct {
	rc     *resourceCache
	opts   WatchOptions
	mu     sync.Mutex
	queue  []*Event
	notify chan struct{}
	err    error
	done   bool
}

func newWatcher(rc *resourceCache, opts WatchOptions) *Watcher {
	return &Watcher{rc: rc, opts: opts, notify: make(chan struct{}, 1)}
}

func (w *Watcher) matches(e *Entry) bool {
	return strings.HasPrefix(e.Key, w.opts.KeyPrefix) && (w.opts.Match == nil || w.opts.Match(e))
}

// translate turns a change into what this watcher sees: an object that stops matching
// its selector is DELETED for it, one that starts matching is ADDED.
func (w *Watcher) translate(ev *Event) *Event {
	switch ev.Type {
	case watch.Bookmark:
		return ev
	case watch.Added:
		if w.matches(ev.Entry) {
			return ev
		}
	case watch.Modified:
		now, before := w.matches(ev.Entry), ev.Prev != nil && w.matches(ev.Prev)
		switch {
		case now && before:
			return ev
		case now:
			return &Event{Type: watch.Added, Entry: ev.Entry, Prev: ev.Prev, RV: ev.RV}
		case before:
			return &Event{Type: watch.Deleted, Entry: ev.Entry, Prev: ev.Prev, RV: ev.RV}
		}
	case watch.Deleted:
		if ev.Prev != nil && w.matches(ev.Prev) {
			return ev
		}
	}
	return nil
}

// offer queues ev for the watcher; called with the cache lock held. The watcher's
// Match (label and field selectors, which for a custom resource may convert the object
// through a conversion webhook) is applied later by Next, in the client's goroutine:
// under the cache lock it would hold every write of the server for a webhook call,
// and a webhook's service lookup reads the cache, which deadlocked the server.
func (w *Watcher) offer(ev *Event) {
	if ev.Type != watch.Bookmark && !strings.HasPrefix(ev.Entry.Key, w.opts.KeyPrefix) {
		return
	}
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	if len(w.queue) >= maxQueued {
		w.mu.Unlock()
		w.stop(ErrWatcherTooSlow)
		return
	}
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	w.signal()
}

func (w *Watcher) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// stop ends the watch with err (nil for a normal end); called with the cache lock held.
func (w *Watcher) stop(err error) {
	w.mu.Lock()
	if !w.done {
		w.done, w.err = true, err
	}
	w.mu.Unlock()
	w.rc.remove(w)
	w.signal()
}

// Next returns what the watcher sees of the events queued since the last call (see
// translate), waiting for at least one. It returns an error when the watch has ended
// (ctx done, stopped, or too slow); events queued before the end are still returned
// first.
func (w *Watcher) Next(ctx context.Context) ([]*Event, error) {
	for {
		seen, done, err := w.take()
		if len(seen) > 0 {
			return seen, nil
		}
		if done {
			if err == nil {
				err = context.Canceled
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w.notify:
		}
	}
}

// Queued returns what the watcher sees of the events queued so far, without waiting
// (possibly none). Called first, it returns the events the watch starts with: the
// initial state, or the changes since the revision it started from.
func (w *Watcher) Queued() []*Event {
	seen, _, _ := w.take()
	return seen
}

// take empties the queue and returns what the watcher sees of it, and whether the
// watch has ended.
func (w *Watcher) take() ([]*Event, bool, error) {
	w.mu.Lock()
	queued, done, err := w.queue, w.done, w.err
	w.queue = nil
	w.mu.Unlock()
	var seen []*Event
	for _, ev := range queued {
		if ev = w.translate(ev); ev != nil {
			seen = append(seen, ev)
		}
	}
	return seen, done, err
}

// Stop ends the watch and releases it from the cache.
func (c *Cache) StopWatch(w *Watcher) {
	c.mu.Lock()
	w.stop(nil)
	c.mu.Unlock()
}
