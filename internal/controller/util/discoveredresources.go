package util

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// DiscoveredResource is one top-level API resource, at its group's preferred version
// (or the only version that serves it).
type DiscoveredResource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Verbs      []string
}

// DiscoverResources asks the apiserver for every top-level resource that supports all
// the given verbs. When some groups fail discovery the others are still returned,
// together with the error (see discovery.IsGroupDiscoveryFailedError).
func DiscoverResources(d discovery.DiscoveryInterface, verbs ...string) ([]DiscoveredResource, error) {
	groups, lists, err := d.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	preferred := map[string]string{} // group -> preferred version
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	chosen := map[schema.GroupResource]DiscoveredResource{}
	var order []schema.GroupResource
	for _, list := range lists {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r, verbs) {
				continue
			}
			gr := schema.GroupResource{Group: gv.Group, Resource: r.Name}
			prev, seen := chosen[gr]
			if seen && (prev.GVR.Version == preferred[gv.Group] || gv.Version != preferred[gv.Group]) {
				continue
			}
			if !seen {
				order = append(order, gr)
			}
			chosen[gr] = DiscoveredResource{GVR: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced, Verbs: r.Verbs}
		}
	}
	out := make([]DiscoveredResource, 0, len(order))
	for _, gr := range order {
		out = append(out, chosen[gr])
	}
	return out, err
}

func hasVerbs(r metav1.APIResource, verbs []string) bool {
	for _, v := range verbs {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	return true
}
