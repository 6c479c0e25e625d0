package admission

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// Reinvoker is a mutating plugin some of whose parts (webhooks, policy bindings) ask
// with reinvocationPolicy IfNeeded to be called once more when a later mutation,
// of any plugin, changed the object after they ran. The chain calls Reinvoke after
// its first pass; the plugin calls again the parts NeedsReinvocation names.
type Reinvoker interface {
	Mutator
	Reinvoke(ctx context.Context, a *Attributes) error
}

// reinvocation is one request's record of object changes and of the parts that may
// be reinvoked: a change counter, and the counter's value when each part last ran.
type reinvocation struct {
	mu      sync.Mutex
	changes int
	ran     map[string]int  // made when a part first asks (most requests none)
	done    map[string]bool // made when a part is first reinvoked
}

type reinvocationKey struct{}

func reinvocationOf(ctx context.Context) *reinvocation {
	r, _ := ctx.Value(reinvocationKey{}).(*reinvocation)
	return r
}

// RecordChange notes that a part of a plugin changed the request's object.
func RecordChange(ctx context.Context) {
	if r := reinvocationOf(ctx); r != nil {
		r.mu.Lock()
		r.changes++
		r.mu.Unlock()
	}
}

// RecordReinvocable notes that a part with reinvocationPolicy IfNeeded (id names it
// within the request, plugin and part) has just run.
func RecordReinvocable(ctx context.Context, id string) {
	if r := reinvocationOf(ctx); r != nil {
		r.mu.Lock()
		if r.ran == nil {
			r.ran = map[string]int{}
		}
		r.ran[id] = r.changes
		r.mu.Unlock()
	}
}

// NeedsReinvocation reports whether a part that ran should run again because the
// object changed after it; it answers true at most once per part and request.
func NeedsReinvocation(ctx context.Context, id string) bool {
	r := reinvocationOf(ctx)
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.ran[id]
	if !ok || r.done[id] || at == r.changes {
		return false
	}
	if r.done == nil {
		r.done = map[string]bool{}
	}
	r.done[id] = true
	return true
}

func (r *reinvocation) pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ran) > 0
}

// admitWithReinvocation runs the mutators once, counting every change of the object
// once some part asked for reinvocation, then lets the Reinvokers call those parts
// again whose object changed after them.
func (c Chain) admitWithReinvocation(ctx context.Context, a *Attributes) error {
	r := &reinvocation{}
	ctx = context.WithValue(ctx, reinvocationKey{}, r)
	var reinvokers []Reinvoker
	for _, m := range c.mutators {
		if !m.Handles(a.Operation) {
			continue
		}
		var before runtime.Object
		if r.pending() && a.Object != nil {
			before = a.Object.DeepCopyObject()
		}
		if err := m.Admit(ctx, a); err != nil {
			return err
		}
		if before != nil && !equality.Semantic.DeepEqual(before, a.Object) {
			RecordChange(ctx)
		}
		if m.reinvoker != nil {
			reinvokers = append(reinvokers, m.reinvoker)
		}
	}
	if !r.pending() {
		return nil
	}
	for _, ri := range reinvokers {
		if err := ri.Reinvoke(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
