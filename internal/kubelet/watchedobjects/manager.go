// Package watchedobjects keeps the objects a node's pods read (ConfigMaps, Secrets)
// current through one watch per object, as upstream kubelet's watch-based manager does:
// a pod that refers to an object registers it, the first reference starts a watch on
// that single object (fieldSelector metadata.name=NAME, the only list or watch the Node
// authorizer grants a kubelet), and the last pod to go stops it. Reading an object is
// then a lookup in memory instead of a GET on every pod sync.
package watchedobjects

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListWatch lists and watches one kind in a namespace; the manager sets the field
// selector that names the single object.
type ListWatch struct {
	// Client is the clientset the functions call: the reflector asks it whether it
	// serves streaming lists (client-go's fake does not).
	Client any
	List   func(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	Watch  func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// Options configure a Manager.
type Options struct {
	// Resource names the kind in errors ("configmaps", "secrets").
	Resource schema.GroupResource
	// ExpectedType is an empty object of the kind (&v1.ConfigMap{}).
	ExpectedType runtime.Object
	ListWatch    ListWatch
	// Refs names the objects of this kind a pod refers to, in its namespace.
	Refs func(pod *v1.Pod) []string
	// Immutable reports an object that can never change: its watch is stopped once
	// it has been read, as upstream's manager does.
	Immutable func(obj runtime.Object) bool
	// Changed, if set, is called with the pods that refer to an object when the
	// object is created, updated or deleted after its watch's first list (and on a
	// later relist, which may hide such a change), outside the Manager's lock.
	Changed func(pods []types.UID)
	// SyncTimeout bounds how long Get waits for a new watch's first list (upstream:
	// one second); 0 means one second.
	SyncTimeout time.Duration
}

// Manager follows the objects of one kind that registered pods refer to.
type Manager struct {
	opts    Options
	mu      sync.Mutex
	pods    map[types.UID][]key // each registered pod's references
	objects map[key]*item
}

type key struct{ namespace, name string }

// item is one watched object: its reflector, the store it fills and how many pods
// refer to it.
type item struct {
	refs     int
	store    *syncStore
	ctx      context.Context // the watch's; done once it is stopped
	cancel   context.CancelFunc
	stopOnce sync.Once
}

// New makes a Manager; it starts no watch until a pod registers.
func New(opts Options) *Manager {
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = time.Second
	}
	return &Manager{opts: opts, pods: map[types.UID][]key{}, objects: map[key]*item{}}
}

// RegisterPod records the objects pod refers to now: new references start watches,
// references its previous version had and this one has not are dropped.
func (m *Manager) RegisterPod(pod *v1.Pod) {
	var keys []key
	seen := map[string]bool{}
	for _, name := range m.opts.Refs(pod) {
		if name != "" && !seen[name] {
			seen[name] = true
			keys = append(keys, key{pod.Namespace, name})
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.pods[pod.UID]
	for _, k := range keys {
		m.acquire(k)
	}
	for _, k := range old {
		m.release(k)
	}
	if len(keys) == 0 {
		delete(m.pods, pod.UID)
		return
	}
	m.pods[pod.UID] = keys
}

// UnregisterPod drops every reference of the pod; watches nobody needs stop.
func (m *Manager) UnregisterPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.pods[uid] {
		m.release(k)
	}
	delete(m.pods, uid)
}

// Stop ends every watch; the Manager is not used afterwards.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, it := range m.objects {
		it.stop()
		delete(m.objects, k)
	}
	clear(m.pods)
}

// Watching is the number of objects being followed, for tests and metrics.
func (m *Manager) Watching() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.objects)
}

// Get returns the object from its watch. ok is false when no registered pod refers to
// it: the caller reads it some other way.
func (m *Manager) Get(ctx context.Context, namespace, name string) (obj runtime.Object, ok bool, err error) {
	m.mu.Lock()
	it := m.objects[key{namespace, name}]
	m.mu.Unlock()
	if it == nil {
		return nil, false, nil
	}
	if !it.store.waitSynced(ctx, m.opts.SyncTimeout) {
		return nil, true, fmt.Errorf("failed to sync %s cache: timed out waiting for the condition", m.opts.Resource.String())
	}
	got, exists, err := it.store.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, true, err
	}
	if !exists {
		return nil, true, apierrors.NewNotFound(m.opts.Resource, name)
	}
	obj = got.(runtime.Object)
	if m.opts.Immutable != nil && m.opts.Immutable(obj) {
		it.stop()
	}
	return obj, true, nil
}

// acquire and release count references; the caller holds m.mu.
func (m *Manager) acquire(k key) {
	if it := m.objects[k]; it != nil {
		it.refs++
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	it := &item{refs: 1, store: newSyncStore(), ctx: ctx, cancel: cancel}
	if m.opts.Changed != nil {
		it.store.changed = func() { m.changed(k) }
	}
	m.objects[k] = it
	sel := fields.OneTermEqualSelector("metadata.name", k.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return m.opts.ListWatch.List(ctx, k.namespace, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return m.opts.ListWatch.Watch(ctx, k.namespace, o)
		},
	}
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, m.opts.ListWatch.Client), m.opts.ExpectedType, it.store, cache.ReflectorOptions{
		Name: m.opts.Resource.String() + " " + k.namespace + "/" + k.name,
	})
	go r.RunWithContext(ctx)
}

// changed tells Options.Changed about the pods that refer to k.
func (m *Manager) changed(k key) {
	var pods []types.UID
	m.mu.Lock()
	for uid, keys := range m.pods {
		for _, pk := range keys {
			if pk == k {
				pods = append(pods, uid)
				break
			}
		}
	}
	m.mu.Unlock()
	if len(pods) > 0 {
		m.opts.Changed(pods)
	}
}

func (m *Manager) release(k key) {
	it := m.objects[k]
	if it == nil {
		return
	}
	if it.refs--; it.refs > 0 {
		return
	}
	it.stop()
	delete(m.objects, k)
}

func (it *item) stop() { it.stopOnce.Do(it.cancel) }

// syncStore is a store that says when its first list has arrived, and calls changed
// (if set) on every change after it.
type syncStore struct {
	cache.Store
	once    sync.Once
	synced  chan struct{}
	changed func()
}

func (s *syncStore) Add(obj any) error    { return s.notify(s.Store.Add(obj)) }
func (s *syncStore) Update(obj any) error { return s.notify(s.Store.Update(obj)) }
func (s *syncStore) Delete(obj any) error { return s.notify(s.Store.Delete(obj)) }

func (s *syncStore) notify(err error) error {
	if s.changed != nil {
		s.changed()
	}
	return err
}

func newSyncStore() *syncStore {
	return &syncStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), synced: make(chan struct{})}
}

func (s *syncStore) Replace(list []any, rv string) error {
	err := s.Store.Replace(list, rv)
	first := false
	s.once.Do(func() { close(s.synced); first = true })
	if first {
		return err // the pods that registered it read it when they sync
	}
	return s.notify(err)
}

func (s *syncStore) waitSynced(ctx context.Context, timeout time.Duration) bool {
	select {
	case <-s.synced:
		return true
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.synced:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}
