package garbagecollector

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// Built-in resources are watched through the shared typed informers other controllers
// use, so their objects are cached once; custom ones through metadata informers.
func TestBuiltInResourcesShareTheTypedInformers(t *testing.T) {
	block := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1-abc", UID: "uid-web-1-abc",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "uid-web-1", BlockOwnerDeletion: &block}}}}
	typed := informers.NewSharedInformerFactory(fake.NewClientset(pod), 0)
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, &metav1.PartialObjectMetadata{})
	live := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: *pod.ObjectMeta.DeepCopy()}
	meta := metadatafake.NewSimpleMetadataClient(scheme, []runtime.Object{live}...)
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: apiResources}}
	c := New(fake.NewClientset(), meta, disc, typed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.discover(ctx); err != nil {
		t.Fatal(err)
	}
	pods := c.monitors.get(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	if !cache.WaitForCacheSync(ctx.Done(), c.monitors.allSynced) {
		t.Fatal("caches never synced")
	}
	// The pod the other controllers' pod informer holds is what the collector sees.
	if _, err := typed.Core().V1().Pods().Lister().Pods("shop").Get("web-1-abc"); err != nil {
		t.Fatalf("the shared pod informer: %v", err)
	}
	if _, found, _ := pods.informer.GetIndexer().GetByKey("shop/web-1-abc"); !found {
		t.Fatal("pods are not watched through the shared typed informer")
	}
	widgets := c.monitors.get(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	if widgets == nil || widgets.informer == nil {
		t.Fatal("a custom resource has no monitor")
	}
	meta.ClearActions()
	if err := c.sync(ctx, objectKey(pods.gvr, "shop", "web-1-abc")); err != nil {
		t.Fatal(err)
	}
	f := &fixture{meta: meta, c: c}
	if got, want := f.writes(), []string{"delete pods/web-1-abc (Background)"}; !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
	if deps := c.monitors.dependentsOf("uid-web-1"); len(deps) != 1 || deps[0].obj.Kind != "Pod" || deps[0].obj.APIVersion != "v1" {
		t.Errorf("dependents of the replica set %+v, want the typed pod seen as v1 Pod metadata", deps)
	}
}
