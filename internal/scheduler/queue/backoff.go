package queue

import (
	"time"

	"mizzen/internal/scheduler/framework"
)

// backoff holds the pods waiting out their back-off, in two heaps as upstream keeps them
// (SchedulerPopFromBackoffQ, on by default since 1.33): pods a plugin rejected, which
// Pop takes early when the active heap is empty rather than leave the scheduler idle,
// and pods whose attempt ended in an error (no rejecting plugin), which always wait
// their back-off out so a failing API or plugin is not retried in a tight loop.
//
// Both heaps order by back-off expiry. (Upstream orders the rejected pods whose
// back-off ends within the same second as its active heap does; here the earliest to
// expire comes first.)
type backoff struct {
	rejected *podHeap
	errored  *podHeap
}

func newBackoff(expiry func(*framework.QueuedPodInfo) time.Time) *backoff {
	byExpiry := func(a, b *framework.QueuedPodInfo) bool { return expiry(a).Before(expiry(b)) }
	return &backoff{rejected: newPodHeap(byExpiry), errored: newPodHeap(byExpiry)}
}

// failedWithError says whether p's last attempt ended in an error rather than a
// rejection by some plugin, as upstream tells them apart.
func failedWithError(p *framework.QueuedPodInfo) bool { return len(p.UnschedulablePlugins) == 0 }

// AddOrUpdate puts p in the heap its last attempt's outcome calls for.
func (b *backoff) AddOrUpdate(p *framework.QueuedPodInfo) {
	if failedWithError(p) {
		b.rejected.Delete(p.Key())
		b.errored.AddOrUpdate(p)
		return
	}
	b.errored.Delete(p.Key())
	b.rejected.AddOrUpdate(p)
}

// Get returns the pod with key from either heap.
func (b *backoff) Get(key string) (*framework.QueuedPodInfo, bool) {
	if p, ok := b.rejected.Get(key); ok {
		return p, true
	}
	return b.errored.Get(key)
}

// Delete removes the pod with key from either heap.
func (b *backoff) Delete(key string) {
	if !b.rejected.Delete(key) {
		b.errored.Delete(key)
	}
}

// Len counts the pods in both heaps.
func (b *backoff) Len() int { return b.rejected.Len() + b.errored.Len() }

// popCompleted removes and returns every pod whose back-off has ended.
func (b *backoff) popCompleted(backingOff func(*framework.QueuedPodInfo) bool) []*framework.QueuedPodInfo {
	var done []*framework.QueuedPodInfo
	for _, h := range []*podHeap{b.rejected, b.errored} {
		for p := h.Peek(); p != nil && !backingOff(p); p = h.Peek() {
			done = append(done, h.PopHead())
		}
	}
	return done
}

// popEarly removes and returns the rejected pod whose back-off ends first, or nil.
func (b *backoff) popEarly() *framework.QueuedPodInfo { return b.rejected.PopHead() }

// canPopEarly says whether popEarly has a pod to return.
func (b *backoff) canPopEarly() bool { return b.rejected.Len() > 0 }
