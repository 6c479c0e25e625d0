package rbac

import (
	"context"
	"fmt"
	"testing"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// BenchmarkAuthorize measures one request's authorization in a cluster with a binding in
// each of 2000 namespaces and 200 ClusterRoleBindings: the cost depends on the bindings
// naming the user, not on how many exist.
func BenchmarkAuthorize(b *testing.B) {
	a := fed(clusterRole("pod-reader", readPods), clusterRole("discovery", getVersion))
	for i := range 2000 {
		ns := fmt.Sprintf("ns-%d", i)
		a.Apply(roleBinding(ns, "readers", "ClusterRole", "pod-reader", userSubject(fmt.Sprintf("user-%d", i)), groupSubject("team-"+ns)), false)
	}
	for i := range 200 {
		a.Apply(clusterRoleBinding(fmt.Sprintf("c-%d", i), "discovery", groupSubject(fmt.Sprintf("group-%d", i))), false)
	}
	user := registry.User{Name: "user-1234", Groups: []string{"system:authenticated", "group-7"}}
	allowed := authz.Attributes{User: user, Verb: "list", ResourceRequest: true, Resource: "pods", Namespace: "ns-1234"}
	denied := authz.Attributes{User: user, Verb: "list", ResourceRequest: true, Resource: "pods", Namespace: "ns-99"}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if ok, _ := a.Authorize(ctx, allowed); !ok {
			b.Fatal("refused")
		}
		if ok, _ := a.Authorize(ctx, denied); ok {
			b.Fatal("allowed")
		}
	}
}
