// Package informermux lets every handler of a shared informer share one client-go
// listener. client-go gives each AddEventHandler its own listener: two goroutines and
// a buffer, and two goroutine hand-offs for every event. A controller-manager has
// about a dozen handlers on its pod informer (one per controller that looks at pods),
// so each pod event woke some two dozen goroutines. Here the handlers registered
// before the informer delivers its first event are called one after another from a
// single listener, in the order they were added; a handler added later gets its own
// listener, as before, so that it is replayed the objects already in the cache.
//
// A handler that blocks delays the others on the same informer. The controllers'
// handlers only look at the event and add keys to their queues.
package informermux

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/tools/cache"
)

// Factory is a SharedInformerFactory whose informers, for the groups a controller
// manager watches most, share one listener among their handlers. It wraps a factory
// over every namespace without list option tweaks; other groups' informers are the
// wrapped factory's own.
type Factory struct {
	informers.SharedInformerFactory

	mu sync.Mutex
	// shared is the wrapper of each informer, keyed by its cache: the typed and the
	// generic (ForResource) paths to one informer hand out different values (client-go
	// wraps it anew in a typed informer on every call) around the same cache.
	shared map[cache.Indexer]*Informer
}

// NewFactory wraps f.
func NewFactory(f informers.SharedInformerFactory) *Factory {
	return &Factory{SharedInformerFactory: f, shared: map[cache.Indexer]*Informer{}}
}

// InformerFor is the wrapped factory's informer for obj's type, with shared handlers.
func (f *Factory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	return f.wrap(f.SharedInformerFactory.InformerFor(obj, newFunc))
}

// ForResource is the wrapped factory's generic informer, with shared handlers.
func (f *Factory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	g, err := f.SharedInformerFactory.ForResource(gvr)
	if err != nil {
		return nil, err
	}
	return genericInformer{GenericInformer: g, informer: f.wrap(g.Informer())}, nil
}

func (f *Factory) wrap(inf cache.SharedIndexInformer) *Informer {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := inf.GetIndexer()
	w := f.shared[key]
	if w == nil {
		w = &Informer{SharedIndexInformer: inf}
		f.shared[key] = w
	}
	return w
}

// The groups whose informers go through InformerFor above; namespace "" and no tweak,
// as the wrapped factory's must be.
func (f *Factory) Apps() apps.Interface                 { return apps.New(f, "", nil) }
func (f *Factory) Batch() batch.Interface               { return batch.New(f, "", nil) }
func (f *Factory) Coordination() coordination.Interface { return coordination.New(f, "", nil) }
func (f *Factory) Core() core.Interface                 { return core.New(f, "", nil) }
func (f *Factory) Discovery() discovery.Interface       { return discovery.New(f, "", nil) }
func (f *Factory) Policy() policy.Interface             { return policy.New(f, "", nil) }
func (f *Factory) Resource() resource.Interface         { return resource.New(f, "", nil) }
func (f *Factory) Storage() storage.Interface           { return storage.New(f, "", nil) }

type genericInformer struct {
	informers.GenericInformer
	informer cache.SharedIndexInformer
}

func (g genericInformer) Informer() cache.SharedIndexInformer { return g.informer }

// Informer is a shared informer whose handlers share one listener until it has
// delivered its first event.
type Informer struct {
	cache.SharedIndexInformer

	mu sync.Mutex
	// own is the shared listener's registration, once a handler has been added.
	own cache.ResourceEventHandlerRegistration
	// handlers are called in order for every event; replaced, never changed in place.
	handlers []*handler
	// delivering is set by the first event: a handler added after it would miss the
	// events already delivered, so it gets a listener of its own.
	delivering bool
}

type handler struct{ cache.ResourceEventHandler }

// AddEventHandler adds h to the shared listener, or gives it its own once events
// have been delivered.
func (i *Informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.delivering {
		return i.SharedIndexInformer.AddEventHandler(h)
	}
	if i.own == nil {
		// The listener calls fanout from its own goroutine, never from within
		// AddEventHandler, so holding mu here cannot deadlock.
		own, err := i.SharedIndexInformer.AddEventHandler(fanout{i})
		if err != nil {
			return nil, err
		}
		i.own = own
	}
	entry := &handler{h}
	i.handlers = append(slices.Clip(i.handlers), entry)
	return &registration{ResourceEventHandlerRegistration: i.own, informer: i, entry: entry}, nil
}

// AddEventHandlerWithResyncPeriod shares the listener when resync is the informer's
// own (zero); a handler with a resync period of its own gets its own listener.
func (i *Informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	if resync == 0 {
		return i.AddEventHandler(h)
	}
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync)
}

// RemoveEventHandler stops calling the handler behind reg.
func (i *Informer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	r, ok := reg.(*registration)
	if !ok || r.informer != i {
		return i.SharedIndexInformer.RemoveEventHandler(reg)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlers = slices.DeleteFunc(slices.Clone(i.handlers), func(e *handler) bool { return e == r.entry })
	return nil
}

// current is the handlers to call for an event, and marks the listener as delivering.
func (i *Informer) current() []*handler {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.delivering = true
	return i.handlers
}

// registration is one handler's; it has synced when the shared listener has, since it
// has seen every event the listener delivered.
type registration struct {
	cache.ResourceEventHandlerRegistration
	informer *Informer
	entry    *handler
}

// fanout is the shared listener's handler.
type fanout struct{ i *Informer }

func (f fanout) OnAdd(obj any, isInInitialList bool) {
	for _, h := range f.i.current() {
		h.OnAdd(obj, isInInitialList)
	}
}

func (f fanout) OnUpdate(oldObj, newObj any) {
	for _, h := range f.i.current() {
		h.OnUpdate(oldObj, newObj)
	}
}

func (f fanout) OnDelete(obj any) {
	for _, h := range f.i.current() {
		h.OnDelete(obj)
	}
}
