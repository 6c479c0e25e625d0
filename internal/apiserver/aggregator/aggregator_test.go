package aggregator

import (
	"net/http"
	"reflect"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/registry"
)

func TestSetRemoteUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   http.Header
		user registry.User
		want http.Header
	}{
		{
			name: "the user, groups and extras",
			in:   http.Header{"Accept": {"application/json"}},
			user: registry.User{Name: "alice", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"example.com/team": {"a", "b"}}},
			want: http.Header{"Accept": {"application/json"}, "X-Remote-User": {"alice"}, "X-Remote-Group": {"devs", "system:authenticated"},
				"X-Remote-Extra-Example.com%2fteam": {"a", "b"}},
		},
		{
			name: "what a client forged is dropped",
			in: http.Header{"X-Remote-User": {"root"}, "X-Remote-Group": {"system:masters"}, "X-Remote-Extra-Scopes": {"all"},
				"x-remote-extra-other": {"x"}},
			user: registry.User{Name: "bob"},
			want: http.Header{"X-Remote-User": {"bob"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.in.Clone()
			setRemoteUser(h, tc.user)
			if !reflect.DeepEqual(h, tc.want) {
				t.Errorf("headers %v, want %v", h, tc.want)
			}
		})
	}
}

func TestVersionDiscovery(t *testing.T) {
	api := &aggregatedAPI{group: "wardle.example.com", version: "v1", fresh: true, resources: &metav1.APIResourceList{
		GroupVersion: "wardle.example.com/v1",
		APIResources: []metav1.APIResource{
			{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"fl"}},
			{Name: "flunders/status", Namespaced: true, Kind: "Flunder", Verbs: metav1.Verbs{"get", "update"}},
			{Name: "flunders/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get"}},
			{Name: "fischers", Kind: "Fischer", Verbs: metav1.Verbs{"get"}},
		},
	}}
	want := apidiscoveryv2.APIVersionDiscovery{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent, Resources: []apidiscoveryv2.APIResourceDiscovery{
		{Resource: "fischers", ResponseKind: &metav1.GroupVersionKind{Group: "wardle.example.com", Version: "v1", Kind: "Fischer"},
			Scope: apidiscoveryv2.ScopeCluster, Verbs: []string{"get"}},
		{Resource: "flunders", ResponseKind: &metav1.GroupVersionKind{Group: "wardle.example.com", Version: "v1", Kind: "Flunder"},
			Scope: apidiscoveryv2.ScopeNamespace, SingularResource: "flunder", Verbs: []string{"get", "list"}, ShortNames: []string{"fl"},
			Subresources: []apidiscoveryv2.APISubresourceDiscovery{
				{Subresource: "status", ResponseKind: &metav1.GroupVersionKind{Group: "wardle.example.com", Version: "v1", Kind: "Flunder"}, Verbs: []string{"get", "update"}},
				{Subresource: "scale", ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: []string{"get"}},
			}},
	}}
	if got := versionDiscovery(api); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	api.fresh = false
	if got := versionDiscovery(api); got.Freshness != apidiscoveryv2.DiscoveryFreshnessStale {
		t.Errorf("a failed refresh: freshness %q, want Stale", got.Freshness)
	}
}
