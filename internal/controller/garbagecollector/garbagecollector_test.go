package garbagecollector

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/controller/util"
)

var apiResources = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: []string{"list", "watch", "delete", "get"}},
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"list", "watch", "delete", "get"}},
		{Name: "nodes", Kind: "Node", Namespaced: false, Verbs: []string{"list", "watch", "delete", "get"}},
		{Name: "events", Kind: "Event", Namespaced: true, Verbs: []string{"list", "watch", "delete", "get"}},
	}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: []string{"list", "watch", "delete", "get"}},
		{Name: "replicasets", Kind: "ReplicaSet", Namespaced: true, Verbs: []string{"list", "watch", "delete", "get"}},
	}},
	{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: []string{"list", "watch", "delete", "get"}},
	}},
}

type objOpt func(*metav1.PartialObjectMetadata)

func obj(apiVersion, kind, namespace, name string, opts ...objOpt) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"}}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// ownedBy adds an ownerReference; uid "" means the owner's usual UID.
func ownedBy(apiVersion, kind, name string, block bool, uid types.UID) objOpt {
	if uid == "" {
		uid = types.UID("uid-" + name)
	}
	return func(o *metav1.PartialObjectMetadata) {
		o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, BlockOwnerDeletion: &block})
	}
}

func deleting(finalizers ...string) objOpt {
	return func(o *metav1.PartialObjectMetadata) {
		now := metav1.Now()
		o.DeletionTimestamp = &now
		o.Finalizers = finalizers
	}
}

type fixture struct {
	meta   *metadatafake.FakeMetadataClient
	c      *Controller
	events *record.FakeRecorder
}

// newFixture builds a collector that has observed cached objects; live objects exist
// in the fake apiserver only (a cache that lags).
func newFixture(t *testing.T, cached []*metav1.PartialObjectMetadata, liveOnly ...*metav1.PartialObjectMetadata) *fixture {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	for _, list := range apiResources {
		gv, _ := schema.ParseGroupVersion(list.GroupVersion)
		for _, r := range list.APIResources {
			scheme.AddKnownTypeWithName(gv.WithKind(r.Kind), &metav1.PartialObjectMetadata{})
		}
	}
	var all []runtime.Object
	for _, o := range append(slices.Clone(cached), liveOnly...) {
		all = append(all, o.DeepCopy())
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, all...)
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: apiResources}}
	c := New(fake.NewClientset(), meta, disc, nil)
	events := record.NewFakeRecorder(100)
	c.recorder = events
	found, err := util.DiscoverResources(disc, "list", "watch", "delete")
	if err != nil {
		t.Fatal(err)
	}
	c.monitors.sync(found, c.addHandlers)
	for _, o := range cached {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		mon := c.monitors.byKind[schema.GroupKind{Group: gv.Group, Kind: o.Kind}]
		if err := mon.informer.GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	meta.ClearActions()
	return &fixture{meta: meta, c: c, events: events}
}

func (f *fixture) forget(t *testing.T, o *metav1.PartialObjectMetadata) {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	mon := f.c.monitors.byKind[schema.GroupKind{Group: gv.Group, Kind: o.Kind}]
	if err := mon.informer.GetIndexer().Delete(o); err != nil {
		t.Fatal(err)
	}
	if err := f.meta.Tracker().Delete(mon.gvr, o.Namespace, o.Name); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func (f *fixture) sync(t *testing.T, resource, namespace, name string) {
	t.Helper()
	for gvr := range f.c.monitors.byGVR {
		if gvr.Resource == resource {
			if err := f.c.sync(context.Background(), objectKey(gvr, namespace, name)); err != nil {
				t.Fatalf("sync %s %s: %v", resource, name, err)
			}
			return
		}
	}
	t.Fatalf("no monitor for %s", resource)
}

// writes renders the API writes: "delete replicasets/web-1 (Background)",
// "patch replicasets/web-1 {...}".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.meta.Actions() {
		switch a := a.(type) {
		case clienttesting.DeleteAction:
			policy := ""
			if p := a.GetDeleteOptions().PropagationPolicy; p != nil {
				policy = string(*p)
			}
			if pre := a.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || string(*pre.UID) != "uid-"+a.GetName() {
				policy += ", no UID precondition"
			}
			out = append(out, "delete "+a.GetResource().Resource+"/"+a.GetName()+" ("+policy+")")
		case clienttesting.PatchAction:
			var body struct {
				Metadata struct {
					OwnerReferences *[]metav1.OwnerReference `json:"ownerReferences"`
					Finalizers      *[]string                `json:"finalizers"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(a.GetPatch(), &body)
			what := ""
			if body.Metadata.OwnerReferences != nil {
				var names []string
				for _, r := range *body.Metadata.OwnerReferences {
					names = append(names, r.Name)
				}
				what += " owners=[" + strings.Join(names, ",") + "]"
			}
			if body.Metadata.Finalizers != nil {
				what += " finalizers=[" + strings.Join(*body.Metadata.Finalizers, ",") + "]"
			}
			out = append(out, "patch "+a.GetResource().Resource+"/"+a.GetName()+what)
		}
	}
	return out
}

func TestCollectDependentsOfGoneOwners(t *testing.T) {
	deploy := obj("apps/v1", "Deployment", "shop", "web")
	tests := []struct {
		story    string
		cached   []*metav1.PartialObjectMetadata
		liveOnly []*metav1.PartialObjectMetadata
		sync     [3]string // resource, namespace, name
		want     []string
		event    string // the Event recorded, if any
	}{
		{
			story:  "a replica set whose deployment is gone is deleted in the background",
			cached: []*metav1.PartialObjectMetadata{obj("apps/v1", "ReplicaSet", "shop", "web-1", ownedBy("apps/v1", "Deployment", "web", true, ""))},
			sync:   [3]string{"replicasets", "shop", "web-1"},
			want:   []string{"delete replicasets/web-1 (Background)"},
		},
		{
			story:  "a replica set whose deployment exists is kept",
			cached: []*metav1.PartialObjectMetadata{deploy, obj("apps/v1", "ReplicaSet", "shop", "web-1", ownedBy("apps/v1", "Deployment", "web", true, ""))},
			sync:   [3]string{"replicasets", "shop", "web-1"},
		},
		{
			story:    "an owner the cache has not seen yet is found by a live GET, and nothing is deleted",
			cached:   []*metav1.PartialObjectMetadata{obj("apps/v1", "ReplicaSet", "shop", "web-1", ownedBy("apps/v1", "Deployment", "web", true, ""))},
			liveOnly: []*metav1.PartialObjectMetadata{deploy},
			sync:     [3]string{"replicasets", "shop", "web-1"},
		},
		{
			story: "an owner replaced by a new object of the same name no longer counts",
			cached: []*metav1.PartialObjectMetadata{deploy,
				obj("apps/v1", "ReplicaSet", "shop", "web-1", ownedBy("apps/v1", "Deployment", "web", true, "uid-of-the-old-web"))},
			sync: [3]string{"replicasets", "shop", "web-1"},
			want: []string{"delete replicasets/web-1 (Background)"},
		},
		{
			story: "with one owner left, only the reference to the gone one is removed",
			cached: []*metav1.PartialObjectMetadata{obj("v1", "ConfigMap", "shop", "keeper"),
				obj("v1", "Pod", "shop", "shared", ownedBy("v1", "ConfigMap", "keeper", false, ""), ownedBy("apps/v1", "ReplicaSet", "gone", true, ""))},
			sync: [3]string{"pods", "shop", "shared"},
			want: []string{"patch pods/shared owners=[keeper]"},
		},
		{
			story:  "custom resources are collected too",
			cached: []*metav1.PartialObjectMetadata{obj("example.com/v1", "Widget", "shop", "gadget", ownedBy("v1", "ConfigMap", "settings", false, ""))},
			sync:   [3]string{"widgets", "shop", "gadget"},
			want:   []string{"delete widgets/gadget (Background)"},
		},
		{
			story:  "a cluster-scoped object owned by a namespaced kind is left alone and reported",
			cached: []*metav1.PartialObjectMetadata{obj("v1", "ConfigMap", "shop", "settings"), obj("v1", "Node", "", "n1", ownedBy("v1", "ConfigMap", "settings", false, ""))},
			sync:   [3]string{"nodes", "", "n1"},
			event:  `Warning OwnerRefInvalidNamespace ownerRef [v1/ConfigMap, namespace: , name: settings, uid: uid-settings] does not exist in namespace ""`,
		},
		{
			story: "an object whose owner lives in another namespace is collected and reported",
			cached: []*metav1.PartialObjectMetadata{obj("v1", "ConfigMap", "other", "settings"),
				obj("v1", "Pod", "shop", "p1", ownedBy("v1", "ConfigMap", "settings", false, ""))},
			sync:  [3]string{"pods", "shop", "p1"},
			want:  []string{"delete pods/p1 (Background)"},
			event: `Warning OwnerRefInvalidNamespace ownerRef [v1/ConfigMap, namespace: shop, name: settings, uid: uid-settings] does not exist in namespace "shop"`,
		},
		{
			story:  "an orphan with the orphan finalizer is deleted in orphan mode",
			cached: []*metav1.PartialObjectMetadata{obj("apps/v1", "ReplicaSet", "shop", "web-1", ownedBy("apps/v1", "Deployment", "web", true, ""), func(o *metav1.PartialObjectMetadata) { o.Finalizers = []string{"orphan"} })},
			sync:   [3]string{"replicasets", "shop", "web-1"},
			want:   []string{"delete replicasets/web-1 (Orphan)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			f := newFixture(t, tt.cached, tt.liveOnly...)
			f.sync(t, tt.sync[0], tt.sync[1], tt.sync[2])
			if got := f.writes(); !slices.Equal(got, tt.want) {
				t.Fatalf("writes\n got %v\nwant %v", got, tt.want)
			}
			var events []string
			for len(f.events.Events) > 0 {
				events = append(events, <-f.events.Events)
			}
			if tt.event == "" && len(events) > 0 || tt.event != "" && !slices.Equal(events, []string{tt.event}) {
				t.Errorf("events %q, want %q", events, tt.event)
			}
		})
	}
}

// Foreground deletion: the deployment waits, with its finalizer, until its replica set
// (which blocks it) is gone; the replica set goes in the foreground because it has
// pods of its own.
func TestForegroundDeletion(t *testing.T) {
	deploy := obj("apps/v1", "Deployment", "shop", "web", deleting("foregroundDeletion"))
	rs := obj("apps/v1", "ReplicaSet", "shop", "web-1", ownedBy("apps/v1", "Deployment", "web", true, ""))
	pod := obj("v1", "Pod", "shop", "web-1-abc", ownedBy("apps/v1", "ReplicaSet", "web-1", true, ""))
	loose := obj("v1", "ConfigMap", "shop", "web-notes", ownedBy("apps/v1", "Deployment", "web", false, ""))
	f := newFixture(t, []*metav1.PartialObjectMetadata{deploy, rs, pod, loose})

	f.sync(t, "deployments", "shop", "web")
	want := []string{"delete replicasets/web-1 (Foreground)", "delete configmaps/web-notes (Background)"}
	// A non-blocking dependent alone would not hold the owner; the replica set does.
	if got := f.writes(); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("first pass writes %v, want %v", got, want)
	}

	// Both are gone now; the finalizer can go.
	f.forget(t, rs)
	f.forget(t, loose)
	f.meta.ClearActions()
	f.sync(t, "deployments", "shop", "web")
	if got := f.writes(); !slices.Equal(got, []string{"patch deployments/web finalizers=[]"}) {
		t.Fatalf("second pass writes %v, want the finalizer removed", got)
	}
}

// Orphan deletion: dependents lose the reference, then the owner its finalizer.
func TestOrphanDeletion(t *testing.T) {
	deploy := obj("apps/v1", "Deployment", "shop", "web", deleting("orphan", "example.com/keep"))
	rs := obj("apps/v1", "ReplicaSet", "shop", "web-1", ownedBy("apps/v1", "Deployment", "web", true, ""), ownedBy("v1", "ConfigMap", "other", false, ""))
	f := newFixture(t, []*metav1.PartialObjectMetadata{deploy, rs, obj("v1", "ConfigMap", "shop", "other")})
	f.sync(t, "deployments", "shop", "web")
	want := []string{"patch replicasets/web-1 owners=[other]", "patch deployments/web finalizers=[example.com/keep]"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Fatalf("writes\n got %v\nwant %v", got, want)
	}
}

func TestEventsAreNotWatched(t *testing.T) {
	f := newFixture(t, nil)
	for gvr := range f.c.monitors.byGVR {
		if gvr.Resource == "events" {
			t.Fatal("events are watched")
		}
	}
	if len(f.c.monitors.byGVR) != 6 {
		t.Fatalf("watching %d resources, want 6", len(f.c.monitors.byGVR))
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestNonBlockingDependentsDoNotHoldTheOwner(t *testing.T) {
	deploy := obj("apps/v1", "Deployment", "shop", "web", deleting("foregroundDeletion"))
	loose := obj("v1", "ConfigMap", "shop", "web-notes", ownedBy("apps/v1", "Deployment", "web", false, ""))
	f := newFixture(t, []*metav1.PartialObjectMetadata{deploy, loose})
	f.sync(t, "deployments", "shop", "web")
	want := []string{"delete configmaps/web-notes (Background)", "patch deployments/web finalizers=[]"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Fatalf("writes\n got %v\nwant %v", got, want)
	}
}

// The whole loop: discovery, metadata informers, workers. A pod whose replica set is
// gone disappears; its sibling with a live owner stays.
func TestRunCollectsThroughInformers(t *testing.T) {
	f := newFixture(t, nil,
		obj("apps/v1", "ReplicaSet", "shop", "web-1"),
		obj("v1", "Pod", "shop", "kept", ownedBy("apps/v1", "ReplicaSet", "web-1", true, "")),
		obj("v1", "Pod", "shop", "orphan", ownedBy("apps/v1", "ReplicaSet", "web-0", true, "")))
	c := New(fake.NewClientset(), f.meta, &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: apiResources}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx, 2)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := f.meta.Resource(pods).Namespace("shop").Get(ctx, "orphan", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("the orphaned pod was not collected")
	}
	if _, err := f.meta.Resource(pods).Namespace("shop").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("the owned pod was collected too: %v", err)
	}
}

// A circle of owners (pod1 owned by pod3, pod2 by pod1, pod3 by pod2, all blocking), one
// of them deleted in the foreground, must not hold every pod forever: the pod that
// closes the circle stops blocking its owner before it goes, as upstream's collector does.
func TestForegroundDeletionThroughACircle(t *testing.T) {
	pod := func(name, owner string, opts ...objOpt) *metav1.PartialObjectMetadata {
		return obj("v1", "Pod", "ns", name, append([]objOpt{ownedBy("v1", "Pod", owner, true, "")}, opts...)...)
	}
	pod1 := pod("pod1", "pod3", deleting("foregroundDeletion"))
	pod2 := pod("pod2", "pod1", deleting("foregroundDeletion"))
	pod3 := pod("pod3", "pod2")
	f := newFixture(t, []*metav1.PartialObjectMetadata{pod1, pod2, pod3})

	// pod2 waits for pod3, whose own dependent (pod1) already waits for its dependents.
	f.sync(t, "pods", "ns", "pod2")
	want := []string{"patch pods/pod3 owners=[pod2]", "delete pods/pod3 (Foreground)"}
	if got := f.writes(); !slices.Equal(got, want) {
		t.Fatalf("writes\n got %v\nwant %v", got, want)
	}
	var patched metav1.PartialObjectMetadata
	if err := json.Unmarshal(f.meta.Actions()[0].(clienttesting.PatchAction).GetPatch(), &patched); err != nil {
		t.Fatal(err)
	}
	if refs := patched.OwnerReferences; len(refs) != 1 || refs[0].BlockOwnerDeletion == nil || *refs[0].BlockOwnerDeletion {
		t.Errorf("pod3's reference to pod2 still blocks: %+v", refs)
	}

	// With pod3 no longer blocking, pod2 may go.
	pod3 = pod("pod3", "pod2", deleting("foregroundDeletion"))
	pod3.OwnerReferences = patched.OwnerReferences
	f = newFixture(t, []*metav1.PartialObjectMetadata{pod1, pod2, pod3})
	f.sync(t, "pods", "ns", "pod2")
	if got := f.writes(); !slices.Equal(got, []string{"patch pods/pod2 finalizers=[]"}) {
		t.Fatalf("pod2's pass writes %v, want its finalizer removed", got)
	}
}
