package garbagecollector

import (
	"context"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"mizzen/internal/controller/util"
)

// byOwnerUID indexes every watched object under the UIDs of its owners; the
// ownerReferences graph is read through it.
const byOwnerUID = "gc.ownerUID"

// ignored resources are never collected, as upstream: events are high-volume and
// expire on their own.
func ignored(gr schema.GroupResource) bool {
	return gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io")
}

// monitor is the informer of one resource: the shared typed one when the resource is
// built in (so objects other controllers watch are cached once), else a metadata one.
type monitor struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	informer   cache.SharedIndexInformer
}

// meta returns the metadata of an object from the monitor's informer (typed or
// metadata-only; tombstones unwrapped), nil if it is neither.
func (mon *monitor) meta(obj any) *metav1.PartialObjectMetadata {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return m
	}
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil
	}
	om, ok := acc.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: mon.gvr.GroupVersion().String(), Kind: mon.kind},
		ObjectMeta: *om,
	}
}

// monitors holds one informer per deletable resource the apiserver serves, and the
// kind -> resource mapping needed to follow an ownerReference.
type monitors struct {
	factory metadatainformer.SharedInformerFactory
	// typed, when set, is the controller-manager's shared factory, preferred for the
	// resources it knows, as upstream.
	typed informers.SharedInformerFactory

	mu     sync.RWMutex
	byGVR  map[schema.GroupVersionResource]*monitor
	byKind map[schema.GroupKind]*monitor
}

func objectKey(gvr schema.GroupVersionResource, namespace, name string) string {
	return strings.Join([]string{gvr.Group, gvr.Version, gvr.Resource, namespace, name}, "|")
}

func parseKey(key string) (gvr schema.GroupVersionResource, namespace, name string, err error) {
	parts := strings.Split(key, "|")
	if len(parts) != 5 {
		return gvr, "", "", fmt.Errorf("bad key %q", key)
	}
	return schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}, parts[3], parts[4], nil
}

// sync adds a monitor for every newly discovered resource and returns the new ones;
// handlers is called to attach event handlers before the informer starts.
func (m *monitors) sync(found []util.DiscoveredResource, handlers func(*monitor)) []*monitor {
	m.mu.Lock()
	defer m.mu.Unlock()
	var added []*monitor
	for _, r := range found {
		if ignored(r.GVR.GroupResource()) {
			continue
		}
		gk := schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}
		if existing, ok := m.byKind[gk]; ok && existing.gvr.Resource == r.GVR.Resource {
			continue // already watched (possibly at another version)
		}
		mon := &monitor{gvr: r.GVR, kind: r.Kind, namespaced: r.Namespaced, informer: m.informerFor(r.GVR)}
		if err := mon.informer.AddIndexers(cache.Indexers{byOwnerUID: ownerUIDs}); err != nil {
			continue // already has the index: a monitor for it exists
		}
		handlers(mon)
		m.byGVR[r.GVR] = mon
		m.byKind[gk] = mon
		added = append(added, mon)
	}
	return added
}

// informerFor picks the shared typed informer of a built-in resource, else a
// metadata-only one.
func (m *monitors) informerFor(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	if m.typed != nil {
		if inf, err := m.typed.ForResource(gvr); err == nil {
			return inf.Informer()
		}
	}
	return m.factory.ForResource(gvr).Informer()
}

func ownerUIDs(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, ref := range m.GetOwnerReferences() {
		out = append(out, string(ref.UID))
	}
	return out, nil
}

func (m *monitors) get(gvr schema.GroupVersionResource) *monitor {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byGVR[gvr]
}

// forOwner finds the monitor of the kind an ownerReference names.
func (m *monitors) forOwner(ref metav1.OwnerReference) *monitor {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byKind[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
}

// dependent is one object that names an owner.
type dependent struct {
	mon *monitor
	obj *metav1.PartialObjectMetadata
}

// dependentsOf returns every watched object with an ownerReference to uid.
func (m *monitors) dependentsOf(uid types.UID) []dependent {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []dependent
	for _, mon := range m.byGVR {
		objs, err := mon.informer.GetIndexer().ByIndex(byOwnerUID, string(uid))
		if err != nil {
			continue
		}
		for _, o := range objs {
			if pom := mon.meta(o); pom != nil {
				out = append(out, dependent{mon: mon, obj: pom})
			}
		}
	}
	return out
}

func (m *monitors) allSynced() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, mon := range m.byGVR {
		if !mon.informer.HasSynced() {
			return false
		}
	}
	return true
}

// start starts the informers not yet running (the typed factory's included: the ones
// the garbage collector asked for after the manager started it).
func (m *monitors) start(ctx context.Context) {
	m.factory.Start(ctx.Done())
	if m.typed != nil {
		m.typed.Start(ctx.Done())
	}
}

// holdsUID reports whether any cached object of the monitor has uid (in whatever
// namespace). A scan: it runs only when an owner was not found where it should be.
func (mon *monitor) holdsUID(uid types.UID) bool {
	for _, obj := range mon.informer.GetStore().List() {
		if o, ok := obj.(metav1.Object); ok && o.GetUID() == uid {
			return true
		}
	}
	return false
}
