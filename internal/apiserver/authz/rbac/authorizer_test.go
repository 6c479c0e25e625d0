package rbac

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func roleBinding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}, Subjects: subjects}
}

func clusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}, Subjects: subjects}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name}
}
func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, Name: name}
}
func saSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

var (
	readPods    = rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	writeDeploy = rbacv1.PolicyRule{Verbs: []string{"create", "update"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}}
	getVersion  = rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/version", "/apis/*"}}
)

// fed returns an authorizer holding objs, fed as the apiserver feeds it.
func fed(objs ...runtime.Object) *Authorizer {
	a := New()
	for _, gr := range a.Resources() {
		a.Replace(gr, nil)
	}
	for _, o := range objs {
		a.Apply(o, false)
	}
	return a
}

func TestAuthorize(t *testing.T) {
	a := fed(
		clusterRole("pod-reader", readPods),
		clusterRole("discovery", getVersion),
		role("dev", "deployer", writeDeploy),
		clusterRoleBinding("alice-reads", "pod-reader", userSubject("alice")),
		clusterRoleBinding("everyone-discovers", "discovery", groupSubject("system:authenticated")),
		roleBinding("dev", "bob-deploys", "Role", "deployer", userSubject("bob")),
		roleBinding("dev", "ops-read", "ClusterRole", "pod-reader", groupSubject("ops")),
		roleBinding("dev", "sa-read", "ClusterRole", "pod-reader", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder"}),
		roleBinding("prod", "sa-other-ns", "ClusterRole", "pod-reader", saSubject("dev", "robot")),
		roleBinding("dev", "dangling", "Role", "missing", userSubject("carol")),
	)
	alice := registry.User{Name: "alice", Groups: []string{"system:authenticated"}}
	bob := registry.User{Name: "bob", Groups: []string{"system:authenticated"}}
	opsDave := registry.User{Name: "dave", Groups: []string{"ops", "system:authenticated"}}
	builder := registry.User{Name: "system:serviceaccount:dev:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:dev", "system:authenticated"}}
	robot := registry.User{Name: "system:serviceaccount:dev:robot"}
	carol := registry.User{Name: "carol"}
	master := registry.User{Name: "root", Groups: []string{"system:masters"}}
	with := func(u registry.User, a authz.Attributes) authz.Attributes { a.User = u; return a }
	tests := []struct {
		name       string
		attrs      authz.Attributes
		want       bool
		wantReason string
	}{
		{"cluster binding, any namespace", with(alice, res("list", "", "pods", "", "kube-system", "")), true,
			`RBAC: allowed by ClusterRoleBinding "alice-reads" of ClusterRole "pod-reader" to User "alice"`},
		{"cluster binding, cluster scope", with(alice, res("watch", "", "pods", "", "", "")), true, ""},
		{"verb not granted", with(alice, res("delete", "", "pods", "", "dev", "p")), false, ""},
		{"role binding in its namespace", with(bob, res("create", "apps", "deployments", "", "dev", "")), true,
			`RBAC: allowed by RoleBinding "bob-deploys/dev" of Role "deployer" to User "bob"`},
		{"role binding elsewhere", with(bob, res("create", "apps", "deployments", "", "prod", "")), false, ""},
		{"role binding, cluster scope", with(bob, res("create", "apps", "deployments", "", "", "")), false, ""},
		{"group subject", with(opsDave, res("get", "", "pods", "", "dev", "p")), true,
			`RBAC: allowed by RoleBinding "ops-read/dev" of ClusterRole "pod-reader" to Group "ops"`},
		{"group subject elsewhere", with(opsDave, res("get", "", "pods", "", "prod", "p")), false, ""},
		{"service account without namespace means the binding's", with(builder, res("get", "", "pods", "", "dev", "p")), true,
			`RBAC: allowed by RoleBinding "sa-read/dev" of ClusterRole "pod-reader" to ServiceAccount "builder/dev"`},
		{"service account of another namespace", with(robot, res("get", "", "pods", "", "prod", "p")), true, ""},
		{"service account's binding elsewhere", with(robot, res("get", "", "pods", "", "dev", "p")), false, ""},
		{"binding to a missing role", with(carol, res("get", "", "pods", "", "dev", "p")), false, ""},
		{"path through a group", with(bob, path("get", "/apis/apps/v1")), true, ""},
		{"path not granted", with(bob, path("get", "/metrics")), false, ""},
		{"role bindings grant no paths", with(opsDave, authz.Attributes{Verb: "get", Path: "/version", Namespace: "dev"}), true, ""},
		{"system:masters", with(master, res("delete", "", "nodes", "", "", "n")), true, ""},
		{"nobody", res("get", "", "pods", "", "dev", "p"), false, ""},
	}
	for _, tt := range tests {
		got, reason := a.Authorize(context.Background(), tt.attrs)
		if got != tt.want {
			t.Errorf("%s: allowed = %v (%s), want %v", tt.name, got, reason, tt.want)
		}
		if tt.wantReason != "" && reason != tt.wantReason {
			t.Errorf("%s: reason = %q, want %q", tt.name, reason, tt.wantReason)
		}
	}
}

// The index follows changes: bindings and roles added, changed, deleted and replaced.
func TestAuthorizerFollowsChanges(t *testing.T) {
	a := fed(clusterRole("pod-reader", readPods))
	eve := registry.User{Name: "eve"}
	canGet := func() bool {
		ok, _ := a.Authorize(context.Background(), authz.Attributes{User: eve, Verb: "get", ResourceRequest: true, Resource: "pods", Namespace: "dev", Name: "p"})
		return ok
	}
	steps := []struct {
		name   string
		change func()
		want   bool
	}{
		{"no binding", func() {}, false},
		{"bound", func() { a.Apply(roleBinding("dev", "b", "ClusterRole", "pod-reader", userSubject("eve")), false) }, true},
		{"subject changed", func() { a.Apply(roleBinding("dev", "b", "ClusterRole", "pod-reader", userSubject("mallory")), false) }, false},
		{"subject back", func() { a.Apply(roleBinding("dev", "b", "ClusterRole", "pod-reader", userSubject("eve")), false) }, true},
		{"role's rules emptied", func() { a.Apply(clusterRole("pod-reader"), false) }, false},
		{"role's rules back", func() { a.Apply(clusterRole("pod-reader", readPods), false) }, true},
		{"role deleted", func() { a.Apply(clusterRole("pod-reader"), true) }, false},
		{"role recreated", func() { a.Apply(clusterRole("pod-reader", readPods), false) }, true},
		{"binding deleted", func() { a.Apply(roleBinding("dev", "b", "", ""), true) }, false},
		{"binding relisted", func() {
			a.Replace(roleBindingsGR, []runtime.Object{roleBinding("dev", "b", "ClusterRole", "pod-reader", userSubject("eve"))})
		}, true},
		{"relisted without it", func() { a.Replace(roleBindingsGR, nil) }, false},
	}
	for _, s := range steps {
		s.change()
		if got := canGet(); got != s.want {
			t.Fatalf("after %q: allowed = %v, want %v", s.name, got, s.want)
		}
	}
}

func TestRulesFor(t *testing.T) {
	a := fed(
		clusterRole("pod-reader", readPods),
		role("dev", "deployer", writeDeploy),
		clusterRoleBinding("all-read", "pod-reader", groupSubject("readers")),
		roleBinding("dev", "deploy", "Role", "deployer", userSubject("bob")),
		roleBinding("dev", "deploy-again", "Role", "deployer", groupSubject("readers")),
	)
	bob := registry.User{Name: "bob", Groups: []string{"readers"}}
	tests := []struct {
		namespace string
		want      []string
	}{
		{"dev", []string{CompactString(writeDeploy), CompactString(readPods), CompactString(writeDeploy)}},
		{"prod", []string{CompactString(readPods)}},
		{"", []string{CompactString(readPods)}},
	}
	for _, tt := range tests {
		var got []string
		for _, r := range a.RulesFor(bob, tt.namespace) {
			got = append(got, CompactString(r))
		}
		if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
			t.Errorf("RulesFor(bob, %q) = %q, want %q", tt.namespace, got, tt.want)
		}
	}
}

func TestEscalationCheck(t *testing.T) {
	a := fed(
		clusterRole("pod-reader", readPods),
		clusterRole("admin-ish", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}),
		clusterRole("rbac-writer", rbacv1.PolicyRule{Verbs: []string{"create", "update"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"*"}}),
		clusterRole("escalator", rbacv1.PolicyRule{Verbs: []string{"escalate"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}}),
		clusterRole("binder", rbacv1.PolicyRule{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"admin-ish"}}),
		roleBinding("dev", "reader", "ClusterRole", "pod-reader", userSubject("reader"), userSubject("escalator"), userSubject("binder")),
		roleBinding("dev", "escalate", "ClusterRole", "escalator", userSubject("escalator")),
		roleBinding("dev", "bind", "ClusterRole", "binder", userSubject("binder")),
	)
	check := a.EscalationCheck()
	as := func(name string, groups ...string) context.Context {
		return registry.WithUser(context.Background(), registry.User{Name: name, Groups: groups})
	}
	deletePods := rbacv1.PolicyRule{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	tests := []struct {
		name    string
		ctx     context.Context
		obj     runtime.Object
		old     runtime.Object
		wantErr string
	}{
		{"role within what the user holds", as("reader"), role("dev", "r", readPods), nil, ""},
		{"role beyond what the user holds", as("reader", "g"), role("dev", "r", readPods, deletePods), nil,
			`roles.rbac.authorization.k8s.io "r" is forbidden: user "reader" (groups=["g"]) is attempting to grant RBAC permissions not currently held:` + "\n" +
				`{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`},
		{"role held only in another namespace", as("reader"), role("prod", "r", readPods), nil, "attempting to grant RBAC permissions not currently held"},
		{"escalate verb", as("escalator"), role("dev", "r", deletePods), nil, ""},
		{"escalate is per namespace", as("escalator"), role("prod", "r", deletePods), nil, "not currently held"},
		{"unchanged rules are not checked", as("reader"), role("dev", "r", deletePods), role("dev", "r", deletePods), ""},
		{"changed rules are", as("reader"), role("dev", "r", deletePods), role("dev", "r"), "not currently held"},
		{"cluster role needs cluster-wide rules", as("reader"), clusterRole("c", readPods), nil, "not currently held"},
		{"aggregation rule needs everything", as("reader"), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"x": "y"}}}}}, nil,
			`clusterroles.rbac.authorization.k8s.io "agg" is forbidden: must have cluster-admin privileges to use the aggregationRule`},
		{"binding to a role the user holds", as("reader"), roleBinding("dev", "b", "ClusterRole", "pod-reader", userSubject("x")), nil, ""},
		{"binding to a role the user does not hold", as("reader", "g"), roleBinding("dev", "b", "ClusterRole", "admin-ish", userSubject("x")), nil,
			`rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "reader" (groups=["g"]) is attempting to grant RBAC permissions not currently held:` + "\n" +
				`{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`},
		{"bind verb on that role", as("binder"), roleBinding("dev", "b", "ClusterRole", "admin-ish", userSubject("x")), nil, ""},
		{"bind verb is per role", as("binder"), roleBinding("dev", "b", "ClusterRole", "rbac-writer", userSubject("x")), nil, "not currently held"},
		{"bind verb is per namespace", as("binder"), roleBinding("prod", "b", "ClusterRole", "admin-ish", userSubject("x")), nil, "not currently held"},
		{"binding to a missing role", as("reader"), roleBinding("dev", "b", "Role", "nope", userSubject("x")), nil,
			`rolebindings.rbac.authorization.k8s.io "b" is forbidden: roles.rbac.authorization.k8s.io "nope" not found`},
		{"cluster binding", as("reader"), clusterRoleBinding("cb", "pod-reader", userSubject("x")), nil, "not currently held"},
		{"system:masters", as("root", "system:masters"), clusterRoleBinding("cb", "admin-ish", userSubject("x")), nil, ""},
		{"the apiserver itself", context.Background(), clusterRoleBinding("cb", "admin-ish", userSubject("x")), nil, ""},
	}
	for _, tt := range tests {
		a := &admission.Attributes{Operation: admission.Create, Object: tt.obj, OldObject: tt.old}
		if tt.old != nil {
			a.Operation = admission.Update
		}
		if u, ok := registry.UserFrom(tt.ctx); ok {
			a.User = u
		} else {
			a.Internal = true
		}
		err := check.Validate(tt.ctx, a)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("%s: allowed, want %q", tt.name, tt.wantErr)
		case tt.wantErr != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want Forbidden containing %q", tt.name, err, tt.wantErr)
		}
	}
}
