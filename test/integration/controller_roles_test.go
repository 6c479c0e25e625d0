package integration

import (
	"context"
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// sar asks the apiserver whether user (in groups) may verb group/resource[/sub] in ns.
func sar(t *testing.T, admin kubernetes.Interface, user string, groups []string, verb, group, resource, sub, ns string) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns},
	}}
	out, err := admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out.Status.Allowed
}

// The controller-manager's own identity holds only upstream's narrow
// system:kube-controller-manager role, and each controller's ServiceAccount upstream's
// system:controller:* role: a SubjectAccessReview matrix answers as upstream's
// bootstrap policy does.
func TestControllerIdentitiesAsUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	srv := apiserver.StartServer(t)
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	kcm := "system:kube-controller-manager"
	authenticated := []string{"system:authenticated"}

	// The manager may write none of these in a namespace: upstream's may not.
	for _, r := range []struct{ group, resource string }{{"", "pods"}, {"", "configmaps"}, {"apps", "deployments"}, {"", "services"}} {
		for _, verb := range []string{"create", "update", "delete"} {
			if sar(t, admin, kcm, authenticated, verb, r.group, r.resource, "", "default") {
				t.Errorf("%s may %s %s in default; upstream's may not", kcm, verb, r.resource)
			}
		}
	}
	// What it does need: informers, the Lease, the controllers' accounts and tokens.
	for _, c := range []struct{ verb, group, resource, sub, ns string }{
		{"list", "", "pods", "", ""}, {"watch", "apps", "deployments", "", ""},
		{"create", "", "serviceaccounts", "", "kube-system"}, {"get", "", "serviceaccounts", "", "kube-system"},
		{"create", "", "serviceaccounts", "token", "kube-system"}, {"create", "coordination.k8s.io", "leases", "", "kube-system"},
	} {
		if !sar(t, admin, kcm, authenticated, c.verb, c.group, c.resource, c.sub, c.ns) {
			t.Errorf("%s may not %s %s/%s; upstream's may", kcm, c.verb, c.resource, c.sub)
		}
	}

	// Each controller's account: what upstream's role allows and refuses.
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	for _, c := range []struct {
		account, verb, group, resource, sub string
		want                                bool
	}{
		{"deployment-controller", "create", "apps", "replicasets", "", true},
		{"deployment-controller", "create", "", "pods", "", false},
		{"replicaset-controller", "create", "", "pods", "", true},
		{"replicaset-controller", "create", "apps", "deployments", "", false},
		{"daemon-set-controller", "create", "", "pods/binding", "", true},
		{"node-controller", "delete", "", "pods", "", true},
		{"node-controller", "create", "", "pods", "", false},
		{"namespace-controller", "deletecollection", "apps", "deployments", "", true},
		{"generic-garbage-collector", "patch", "apps", "replicasets", "", true},
		{"generic-garbage-collector", "create", "apps", "replicasets", "", false},
		{"endpointslice-controller", "create", "discovery.k8s.io", "endpointslices", "", true},
		{"root-ca-cert-publisher", "create", "", "configmaps", "", true},
		{"root-ca-cert-publisher", "create", "", "secrets", "", false},
		{"job-controller", "update", "batch", "jobs", "status", true},
		{"certificate-controller", "update", "certificates.k8s.io", "certificatesigningrequests", "approval", true},
	} {
		user := "system:serviceaccount:kube-system:" + c.account
		if got := sar(t, admin, user, saGroups, c.verb, c.group, c.resource, c.sub, "default"); got != c.want {
			t.Errorf("%s %s %s/%s: allowed %v, upstream's role: %v", c.account, c.verb, c.resource, c.sub, got, c.want)
		}
	}

	// The roles and bindings exist under upstream's names.
	ctx := context.Background()
	for _, name := range []string{"deployment-controller", "generic-garbage-collector", "node-controller", "certificate-controller"} {
		role := "system:controller:" + name
		if _, err := admin.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err != nil {
			t.Errorf("ClusterRole %s: %v", role, err)
		}
		b, err := admin.RbacV1().ClusterRoleBindings().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			t.Errorf("ClusterRoleBinding %s: %v", role, err)
			continue
		}
		if got := fmt.Sprint(b.Subjects); len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != name || b.Subjects[0].Namespace != "kube-system" {
			t.Errorf("ClusterRoleBinding %s subjects %s, want the ServiceAccount kube-system/%s", role, got, name)
		}
	}
	if _, err := admin.RbacV1().Roles("kube-system").Get(ctx, "system:controller:token-cleaner", metav1.GetOptions{}); err != nil {
		t.Errorf("Role kube-system/system:controller:token-cleaner: %v", err)
	}
}
