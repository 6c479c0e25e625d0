package garbagecollector

import (
	"context"
	"fmt"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"mizzen/internal/controller/util"
)

// byOwnerUID indexes every watched object under the UIDs of its owners; the
// ownerReferences graph is read through it.
const byOwnerUID = "gc.ownerUID"

// byUID indexes every watched object under its own UID, to tell an owner that lives in
// another namespace from one that does not exist.
const byUID = "gc.uid"

// ignored resources are never collected, as upstream: events are high-volume and
// expire on their own.
func ignored(gr schema.GroupResource) bool {
	return gr.Resource == "events" && (gr.Group == "" || gr.Group == "events.k8s.io")
}

// monitor is the metadata informer of one resource.
type monitor struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	informer   cache.SharedIndexInformer
}

// monitors holds one metadata informer per deletable resource the apiserver serves,
// and the kind -> resource mapping needed to follow an ownerReference.
type monitors struct {
	factory metadatainformer.SharedInformerFactory

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
		mon := &monitor{gvr: r.GVR, namespaced: r.Namespaced, informer: m.factory.ForResource(r.GVR).Informer()}
		if err := mon.informer.AddIndexers(cache.Indexers{byOwnerUID: ownerUIDs, byUID: ownUID}); err != nil {
			continue // already has the index: a monitor for it exists
		}
		handlers(mon)
		m.byGVR[r.GVR] = mon
		m.byKind[gk] = mon
		added = append(added, mon)
	}
	return added
}

func ownUID(obj any) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		return []string{string(m.GetUID())}, nil
	}
	return nil, nil
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
			if pom, ok := o.(*metav1.PartialObjectMetadata); ok {
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

func (m *monitors) start(ctx context.Context) { m.factory.Start(ctx.Done()) }
