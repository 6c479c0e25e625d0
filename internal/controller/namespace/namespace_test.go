package namespace

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"mizzen/internal/controller/util"
)

// apiResources is what discovery reports: core and apps types, a cluster-scoped kind,
// a custom resource added by a CRD, and a resource that cannot be deleted.
var apiResources = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: []string{"list", "delete", "get"}},
		{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: []string{"get", "update"}},
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"list", "delete", "get"}},
		{Name: "nodes", Kind: "Node", Namespaced: false, Verbs: []string{"list", "delete", "get"}},
		{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
	}},
	{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: []string{"list", "delete", "get"}},
	}},
	{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: []string{"list", "delete", "get"}},
	}},
}

func object(apiVersion, kind, namespace, name string, finalizers ...string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name), Finalizers: finalizers},
	}
}

func terminatingNamespace(name string, finalizers ...corev1.FinalizerName) *corev1.Namespace {
	now := metav1.Now()
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: finalizers},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
}

// partialDiscovery reports one group as failing, the way a down aggregated API does.
type partialDiscovery struct{ *fakediscovery.FakeDiscovery }

func (d partialDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	groups, lists, _ := d.FakeDiscovery.ServerGroupsAndResources()
	return groups, lists, &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
		{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("the server is currently unable to handle the request"),
	}}
}

// metadataScheme knows every discovered kind as metadata-only objects.
func metadataScheme() *runtime.Scheme {
	scheme := metadatafake.NewTestScheme()
	for _, list := range apiResources {
		gv, _ := schema.ParseGroupVersion(list.GroupVersion)
		for _, r := range list.APIResources {
			scheme.AddKnownTypeWithName(gv.WithKind(r.Kind), &metav1.PartialObjectMetadata{})
			scheme.AddKnownTypeWithName(gv.WithKind(r.Kind+"List"), &metav1.PartialObjectMetadataList{})
		}
	}
	return scheme
}

type fixture struct {
	client *fake.Clientset
	meta   *metadatafake.FakeMetadataClient
	c      *Controller
}

func newFixture(ns *corev1.Namespace, partial bool, content ...runtime.Object) *fixture {
	client := fake.NewClientset(ns)
	client.PrependReactor("create", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "finalize" {
			return true, a.(clienttesting.CreateAction).GetObject(), nil
		}
		return false, nil, nil
	})
	disc := client.Discovery().(*fakediscovery.FakeDiscovery)
	disc.Resources = apiResources
	var d discovery.DiscoveryInterface = disc
	if partial {
		d = partialDiscovery{disc}
	}
	meta := metadatafake.NewSimpleMetadataClient(metadataScheme(), content...)
	// Like the apiserver, an object with finalizers is only marked for deletion.
	meta.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj, err := meta.Tracker().Get(a.GetResource(), a.GetNamespace(), a.(clienttesting.DeleteAction).GetName())
		if err != nil {
			return false, nil, nil
		}
		m := obj.(*metav1.PartialObjectMetadata)
		if len(m.Finalizers) == 0 {
			return false, nil, nil
		}
		now := metav1.Now()
		m.DeletionTimestamp = &now
		return true, nil, meta.Tracker().Update(a.GetResource(), m, a.GetNamespace())
	})
	inf := informers.NewSharedInformerFactory(client, 0)
	f := &fixture{client: client, meta: meta, c: New(client, meta, d, inf.Core().V1().Namespaces())}
	client.ClearActions()
	return f
}

// deleted lists "resource/name" for every delete the controller sent.
func (f *fixture) deleted() []string {
	var out []string
	for _, a := range f.meta.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok {
			out = append(out, d.GetResource().Resource+"/"+d.GetNamespace()+"/"+d.GetName())
		}
	}
	sort.Strings(out)
	return out
}

func (f *fixture) finalized() *corev1.Namespace {
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "finalize" {
			return a.(clienttesting.CreateAction).GetObject().(*corev1.Namespace)
		}
	}
	return nil
}

func (f *fixture) condition(t *testing.T, typ corev1.NamespaceConditionType) corev1.NamespaceCondition {
	t.Helper()
	ns, err := f.client.CoreV1().Namespaces().Get(context.Background(), "doomed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ns.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no %s condition in %+v", typ, ns.Status.Conditions)
	return corev1.NamespaceCondition{}
}

func TestTerminatingNamespaceIsEmptiedThenFinalized(t *testing.T) {
	f := newFixture(terminatingNamespace("doomed", corev1.FinalizerKubernetes, "example.com/other"), false,
		object("v1", "Pod", "doomed", "web-1"),
		object("v1", "ConfigMap", "doomed", "settings"),
		object("apps/v1", "Deployment", "doomed", "web"),
		object("example.com/v1", "Widget", "doomed", "gadget"),
		object("v1", "Pod", "kept", "neighbour"),
	)
	if err := f.c.sync(context.Background(), "doomed"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	want := []string{"configmaps/doomed/settings", "deployments/doomed/web", "pods/doomed/web-1", "widgets/doomed/gadget"}
	if got := f.deleted(); !slices.Equal(got, want) {
		t.Fatalf("deleted %v, want %v", got, want)
	}
	ns := f.finalized()
	if ns == nil {
		t.Fatal("namespace not finalized")
	}
	if !slices.Equal(ns.Spec.Finalizers, []corev1.FinalizerName{"example.com/other"}) {
		t.Errorf("finalize sent finalizers %v, want only the other one", ns.Spec.Finalizers)
	}
	for typ, reason := range map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "ResourcesDiscovered",
		corev1.NamespaceDeletionContentFailure:   "ContentDeleted",
		corev1.NamespaceContentRemaining:         "ContentRemoved",
		corev1.NamespaceFinalizersRemaining:      "ContentHasNoFinalizers",
	} {
		if c := f.condition(t, typ); c.Status != corev1.ConditionFalse || c.Reason != reason {
			t.Errorf("%s = %s/%s, want False/%s", typ, c.Status, c.Reason, reason)
		}
	}
}

func TestContentWithFinalizersHoldsTheNamespace(t *testing.T) {
	f := newFixture(terminatingNamespace("doomed", corev1.FinalizerKubernetes), false,
		object("example.com/v1", "Widget", "doomed", "stubborn", "example.com/cleanup"),
		object("v1", "ConfigMap", "doomed", "settings"))
	err := f.c.sync(context.Background(), "doomed")
	var later *util.RequeueAfterError
	if !errors.As(err, &later) {
		t.Fatalf("sync returned %v, want a requeue while content remains", err)
	}
	if f.finalized() != nil {
		t.Fatal("namespace finalized while a widget remains")
	}
	remaining := f.condition(t, corev1.NamespaceContentRemaining)
	if remaining.Status != corev1.ConditionTrue || remaining.Reason != "SomeResourcesRemain" ||
		remaining.Message != "Some resources are remaining: widgets.example.com has 1 resource instances" {
		t.Errorf("NamespaceContentRemaining = %+v", remaining)
	}
	fin := f.condition(t, corev1.NamespaceFinalizersRemaining)
	if fin.Status != corev1.ConditionTrue || fin.Message != "Some content in the namespace has finalizers remaining: example.com/cleanup in 1 resource instances" {
		t.Errorf("NamespaceFinalizersRemaining = %+v", fin)
	}

	// The widget's owner finishes its cleanup; the next pass finalizes.
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	if err := f.meta.Tracker().Delete(widgets, "doomed", "stubborn"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(context.Background(), "doomed"); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if f.finalized() == nil {
		t.Fatal("namespace not finalized once empty")
	}
	if c := f.condition(t, corev1.NamespaceContentRemaining); c.Status != corev1.ConditionFalse {
		t.Errorf("NamespaceContentRemaining still %s", c.Status)
	}
}

func TestDiscoveryFailureDeletesWhatItCanButDoesNotFinalize(t *testing.T) {
	f := newFixture(terminatingNamespace("doomed", corev1.FinalizerKubernetes), true, object("v1", "Pod", "doomed", "web-1"))
	if err := f.c.sync(context.Background(), "doomed"); err == nil {
		t.Fatal("sync succeeded despite failed discovery")
	}
	if got := f.deleted(); !slices.Equal(got, []string{"pods/doomed/web-1"}) {
		t.Errorf("deleted %v", got)
	}
	if f.finalized() != nil {
		t.Fatal("finalized although a group could not be listed")
	}
	c := f.condition(t, corev1.NamespaceDeletionDiscoveryFailure)
	if c.Status != corev1.ConditionTrue || c.Reason != "DiscoveryFailed" ||
		!strings.HasPrefix(c.Message, "Discovery failed for some groups, 1 failing: metrics.k8s.io/v1beta1") {
		t.Errorf("NamespaceDeletionDiscoveryFailure = %+v", c)
	}
}

func TestNamespacesNotBeingDeletedAreUntouched(t *testing.T) {
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
	for _, ns := range []*corev1.Namespace{active, terminatingNamespace("doomed")} {
		f := newFixture(ns, false, object("v1", "Pod", "doomed", "web-1"))
		if err := f.c.sync(context.Background(), "doomed"); err != nil {
			t.Fatal(err)
		}
		if len(f.deleted()) != 0 || f.finalized() != nil {
			t.Errorf("namespace %+v: deleted %v", ns.ObjectMeta, f.deleted())
		}
		for _, a := range f.client.Actions() {
			if a.GetVerb() != "get" {
				t.Errorf("unexpected write %v", a)
			}
		}
	}
}

// Ordered namespace deletion: while a pod is left, nothing else in the namespace is
// deleted, so a pod that is still stopping keeps its config maps and secrets.
func TestPodsGoBeforeEverythingElse(t *testing.T) {
	f := newFixture(terminatingNamespace("doomed", corev1.FinalizerKubernetes), false,
		object("v1", "ConfigMap", "doomed", "settings"),
		object("v1", "Pod", "doomed", "stopping", "example.com/hold"),
		object("apps/v1", "Deployment", "doomed", "web"))
	err := f.c.sync(context.Background(), "doomed")
	var later *util.RequeueAfterError
	if !errors.As(err, &later) {
		t.Fatalf("sync returned %v, want a requeue while the pod remains", err)
	}
	if got, want := f.deleted(), []string{"pods/doomed/stopping"}; !slices.Equal(got, want) {
		t.Fatalf("deleted %v while the pod remains, want only %v", got, want)
	}
	if c := f.condition(t, corev1.NamespaceContentRemaining); c.Message != "Some resources are remaining: pods has 1 resource instances" {
		t.Errorf("NamespaceContentRemaining = %+v", c)
	}

	// The pod's finalizer goes; the next pass deletes the rest.
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	if err := f.meta.Tracker().Delete(pods, "doomed", "stopping"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(context.Background(), "doomed"); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if got, want := f.deleted(), []string{"configmaps/doomed/settings", "deployments/doomed/web", "pods/doomed/stopping"}; !slices.Equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	if f.finalized() == nil {
		t.Fatal("namespace not finalized once empty")
	}
}
