package flowcontrol

import (
	"sync"
	"sync/atomic"
)

// watchCounts counts the watches open through the filter by what they watch (a
// resource, in every namespace, in one, or one object), as upstream's watch tracker
// does, so that a mutation's estimate can tell how many watchers its change will
// notify. A watch of pods selecting one spec.nodeName is not counted: the watch cache
// wakes only the watchers of a pod's own node (as upstream's leaves out the watches its
// cache indexes).
//
// Reading is what is hot (every mutation): the resources' map is replaced, never
// changed, so that a read takes no lock; a resource's cluster-wide count is an atomic;
// only a resource with watches of one namespace or object has a map to look in, under
// a read lock. Watches start and end rarely by comparison, and serialize on mu.
type watchCounts struct {
	mu        sync.Mutex
	resources atomic.Pointer[map[groupResource]*resourceWatches]
}

type groupResource struct{ group, resource string }

// resourceWatches are the watches of one resource.
type resourceWatches struct {
	// all counts the watches of every namespace; scoped those of one namespace or
	// object, kept by scope in byScope.
	all, scoped atomic.Int64
	mu          sync.RWMutex
	byScope     map[watchScope]int
}

// watchScope is a namespace (name empty), or one object (of a namespace or none).
type watchScope struct{ namespace, name string }

// register counts a watch until the returned function is called.
func (c *watchCounts) register(r *Request) (forget func()) {
	if r.IndexedWatch {
		return func() {}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rw := c.resourceLocked(groupResource{r.APIGroup, r.Resource})
	scope := watchScope{r.Namespace, r.Name}
	if scope == (watchScope{}) {
		rw.all.Add(1)
		return func() { rw.all.Add(-1) }
	}
	rw.mu.Lock()
	rw.byScope[scope]++
	rw.mu.Unlock()
	rw.scoped.Add(1)
	return func() {
		rw.mu.Lock()
		if rw.byScope[scope]--; rw.byScope[scope] == 0 {
			delete(rw.byScope, scope)
		}
		rw.mu.Unlock()
		rw.scoped.Add(-1)
	}
}

// resourceLocked is the resource's counts, added if new.
func (c *watchCounts) resourceLocked(gr groupResource) *resourceWatches {
	var cur map[groupResource]*resourceWatches
	if p := c.resources.Load(); p != nil {
		cur = *p
	}
	if rw := cur[gr]; rw != nil {
		return rw
	}
	next := make(map[groupResource]*resourceWatches, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	rw := &resourceWatches{byScope: map[watchScope]int{}}
	next[gr] = rw
	c.resources.Store(&next)
	return rw
}

// interested is how many watches a change of the object the request names would
// notify: those of its resource in every namespace, in its namespace, and of it.
func (c *watchCounts) interested(r *Request) int {
	p := c.resources.Load()
	if p == nil {
		return 0
	}
	rw := (*p)[groupResource{r.APIGroup, r.Resource}]
	if rw == nil {
		return 0
	}
	n := int(rw.all.Load())
	if rw.scoped.Load() == 0 || (r.Namespace == "" && r.Name == "") {
		return n
	}
	rw.mu.RLock()
	if r.Namespace != "" {
		n += rw.byScope[watchScope{namespace: r.Namespace}]
	}
	if r.Name != "" {
		n += rw.byScope[watchScope{r.Namespace, r.Name}]
	}
	rw.mu.RUnlock()
	return n
}
