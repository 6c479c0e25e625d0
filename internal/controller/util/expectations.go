package util

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ExpectationsTimeout is how long a controller trusts its own unobserved writes before
// it falls back to what the cache shows (a lost watch event must not wedge it).
const ExpectationsTimeout = 5 * time.Minute

// Expectations remembers, per controller key, how many creations and deletions a
// controller issued but has not yet seen in its informer cache. While any are
// outstanding the controller must not trust the cache to count pods, or a slow cache
// would make it create (or delete) again.
type Expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	items map[string]*expectation
}

type expectation struct {
	add       int64
	dels      map[types.UID]bool
	timestamp time.Time
}

// NewExpectations returns empty expectations; now may be nil for the wall clock.
func NewExpectations(now func() time.Time) *Expectations {
	if now == nil {
		now = time.Now
	}
	return &Expectations{now: now, items: map[string]*expectation{}}
}

// Satisfied reports whether key has no outstanding writes (or they are too old to wait
// for, or nothing was ever expected).
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.items[key]
	if !ok {
		return true
	}
	if x.add <= 0 && len(x.dels) == 0 {
		return true
	}
	return e.now().Sub(x.timestamp) > ExpectationsTimeout
}

// Expect records that adds creations and the deletion of the pods with deleteUIDs are
// about to be issued for key, replacing whatever was expected before. Deletions are
// tracked by UID so that seeing a pod's deletionTimestamp and then its delete event
// counts once.
func (e *Expectations) Expect(key string, adds int, deleteUIDs []types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	dels := make(map[types.UID]bool, len(deleteUIDs))
	for _, uid := range deleteUIDs {
		dels[uid] = true
	}
	e.items[key] = &expectation{add: int64(adds), dels: dels, timestamp: e.now()}
}

// CreationObserved lowers the outstanding creations of key by one (a watch saw one, or
// a create call failed and will never be seen).
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.items[key]; ok {
		x.add--
	}
}

// DeletionObserved marks the deletion of the pod with uid as seen for key.
func (e *Expectations) DeletionObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.items[key]; ok {
		delete(x.dels, uid)
	}
}

// Delete forgets key (its controller object is gone).
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, key)
}
