package util

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// Each resource is reported once, at its group's preferred version, or at the only
// version that serves it; subresources and resources lacking a verb are left out.
func TestDiscoverResources(t *testing.T) {
	verbs := []string{"list", "delete"}
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{
			{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: verbs},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: verbs},
			{Name: "gadgets", Kind: "Gadget", Namespaced: false, Verbs: verbs},
			{Name: "widgets/status", Kind: "Widget", Namespaced: true, Verbs: []string{"get", "update"}},
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: []string{"create"}},
			{Name: "pods", Kind: "Pod", Namespaced: true, Verbs: verbs},
		}},
	}}}
	got, err := DiscoverResources(disc, "list", "delete")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"example.com/v2, Resource=widgets": true, "example.com/v1, Resource=gadgets": false, "/v1, Resource=pods": true}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for _, r := range got {
		namespaced, ok := want[r.GVR.String()]
		if !ok || namespaced != r.Namespaced {
			t.Errorf("unexpected %s (namespaced %v)", r.GVR, r.Namespaced)
		}
	}
}
