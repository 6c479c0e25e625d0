package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"mizzen/internal/controller/clusterroleaggregation"
	"mizzen/internal/testing/apiserver"
)

// userClient gives the test a client certificate for user in groups.
func userClient(t *testing.T, srv *apiserver.Server, user string, groups ...string) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	cfg, err := srv.ComponentConfig("user-"+user, user, groups)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, kubernetes.NewForConfigOrDie(cfg)
}

// eventually polls cond until it holds, for up to 20 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantForbidden(err error, msg string) error {
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("err = %v, want 403 Forbidden", err)
	}
	if msg != "" && err.Error() != msg {
		return fmt.Errorf("message %q, want %q", err.Error(), msg)
	}
	return nil
}

// mustCreate fails the test when the create it is given failed:
// mustCreate(t)(client.Create(...)).
func mustCreate(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

var podReader = []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}}

func TestRBACForbidsUntilABindingGrants(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	_, alice := userClient(t, srv, "alice", "developers")

	_, err := alice.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err := wantForbidden(err, `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default"`); err != nil {
		t.Fatal(err)
	}
	_, err = alice.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err := wantForbidden(err, `nodes "n1" is forbidden: User "alice" cannot get resource "nodes" in API group "" at the cluster scope`); err != nil {
		t.Fatal(err)
	}
	err = alice.CoreV1().RESTClient().Get().AbsPath("/foo/bar").Do(ctx).Error()
	if err := wantForbidden(err, `forbidden: User "alice" cannot get path "/foo/bar"`); err != nil {
		t.Fatal(err)
	}
	// Without credentials the user is system:anonymous, whom the default policy lets
	// read health and version only.
	anonymous := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(srv.AdminConfig)).CoreV1().RESTClient()
	if err := anonymous.Get().AbsPath("/healthz").Do(ctx).Error(); err != nil {
		t.Errorf("anonymous /healthz: %v", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(srv.AdminConfig)).Discovery().ServerVersion(); err != nil {
		t.Errorf("anonymous /version: %v", err)
	}
	err = anonymous.Get().AbsPath("/readyz/etcd").Do(ctx).Error()
	if err := wantForbidden(err, `forbidden: User "system:anonymous" cannot get path "/readyz/etcd"`); err != nil {
		t.Errorf("anonymous /readyz/etcd: %v", err)
	}
	// Discovery is not the anonymous user's (upstream binds system:discovery to
	// authenticated users only): RBAC refuses it, 403.
	err = anonymous.Get().AbsPath("/api").Do(ctx).Error()
	if err := wantForbidden(err, `forbidden: User "system:anonymous" cannot get path "/api"`); err != nil {
		t.Errorf("anonymous /api: %v", err)
	}
	// Discovery is every authenticated user's (system:discovery), so is who-am-I.
	if _, err := alice.Discovery().ServerGroups(); err != nil {
		t.Fatalf("discovery: %v", err)
	}
	if _, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("whoami: %v", err)
	}

	// A RoleBinding grants its namespace only; the authorizer follows it without restart.
	mustCreate(t)(admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"}, Rules: podReader}, metav1.CreateOptions{}))
	mustCreate(t)(admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-reads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}))
	eventually(t, "alice lists pods once bound", func() error {
		_, err := alice.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err
	})
	_, err = alice.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err := wantForbidden(err, ""); err != nil {
		t.Errorf("another namespace: %v", err)
	}
	_, err = alice.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{})
	if err := wantForbidden(err, `pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "default"`); err != nil {
		t.Errorf("a verb the role lacks: %v", err)
	}

	// A ClusterRoleBinding to her group grants every namespace.
	mustCreate(t)(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"nodes"}}}}, metav1.CreateOptions{}))
	mustCreate(t)(admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "developers-read-nodes"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "developers"}}}, metav1.CreateOptions{}))
	eventually(t, "alice lists nodes through her group", func() error {
		_, err := alice.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	})

	// Deleting the binding takes the access back.
	if err := admin.RbacV1().RoleBindings("default").Delete(ctx, "alice-reads", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice refused once unbound", func() error {
		_, err := alice.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return wantForbidden(err, "")
	})
}

func TestRBACServiceAccountSubjects(t *testing.T) {
	cfg, admin := startWithServiceAccounts(t)
	ctx := context.Background()
	for _, ns := range []string{"team-a", "team-b"} {
		mustCreate(t)(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
		mustCreate(t)(admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bot"}}, metav1.CreateOptions{}))
	}
	token := func(ns string) kubernetes.Interface {
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "bot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tokenClient(cfg, tr.Status.Token)
	}
	botA, botB := token("team-a"), token("team-b")
	mustCreate(t)(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"}, Rules: podReader}, metav1.CreateOptions{}))
	bind := func(ns, name string, s rbacv1.Subject) {
		mustCreate(t)(admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pod-reader"}, Subjects: []rbacv1.Subject{s}}, metav1.CreateOptions{}))
	}
	// team-a's bot by name, in team-a; team-b's bots as the group of their namespace,
	// in shared.
	mustCreate(t)(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}, metav1.CreateOptions{}))
	bind("team-a", "bot", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: "team-a"})
	bind("shared", "team-b", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:team-b"})

	tests := []struct {
		who     string
		client  kubernetes.Interface
		ns      string
		allowed bool
	}{
		{"team-a's bot", botA, "team-a", true},
		{"team-a's bot", botA, "shared", false},
		{"team-a's bot", botA, "team-b", false},
		{"team-b's bot", botB, "shared", true},
		{"team-b's bot", botB, "team-a", false},
	}
	for _, tt := range tests {
		eventually(t, fmt.Sprintf("%s listing pods in %s", tt.who, tt.ns), func() error {
			_, err := tt.client.CoreV1().Pods(tt.ns).List(ctx, metav1.ListOptions{})
			if tt.allowed {
				return err
			}
			return wantForbidden(err, fmt.Sprintf(`pods is forbidden: User "system:serviceaccount:%s:bot" cannot list resource "pods" in API group "" in the namespace %q`,
				map[bool]string{true: "team-a", false: "team-b"}[tt.client == botA], tt.ns))
		})
	}
}

func TestRBACAggregatedRoles(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	factory := informers.NewSharedInformerFactory(admin, 0)
	c := clusterroleaggregation.New(admin, factory.Rbac().V1().ClusterRoles())
	factory.Start(ctx.Done())
	go c.Run(ctx, 1)

	// The defaults aggregate: view holds pods/log, edit holds view's rules and its own,
	// admin holds edit's.
	for _, tt := range []struct{ role, group, resource, verb string }{
		{"view", "", "pods/log", "get"}, {"edit", "", "pods/log", "get"}, {"edit", "", "secrets", "create"},
		{"admin", rbacv1.GroupName, "roles", "create"}, {"admin", "", "secrets", "delete"},
	} {
		eventually(t, fmt.Sprintf("%s grants %s %s", tt.role, tt.verb, tt.resource), func() error {
			return roleGrants(ctx, admin, tt.role, tt.group, tt.resource, tt.verb)
		})
	}
	// A new role labelled for view reaches view, edit and admin.
	mustCreate(t)(admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets-view", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}},
	}, metav1.CreateOptions{}))
	for _, role := range []string{"view", "edit", "admin"} {
		eventually(t, role+" grants widgets", func() error { return roleGrants(ctx, admin, role, "example.com", "widgets", "list") })
	}
	// And a user bound to view may list them.
	_, carol := userClient(t, srv, "carol")
	mustCreate(t)(admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "carol-views"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}}}, metav1.CreateOptions{}))
	eventually(t, "carol may list widgets", func() error {
		return selfReview(ctx, carol, &authorizationv1.ResourceAttributes{Verb: "list", Group: "example.com", Resource: "widgets", Namespace: "default"}, true)
	})
	// Without the label, the rules leave again.
	if err := admin.RbacV1().ClusterRoles().Delete(ctx, "widgets-view", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "carol no longer may list widgets", func() error {
		return selfReview(ctx, carol, &authorizationv1.ResourceAttributes{Verb: "list", Group: "example.com", Resource: "widgets", Namespace: "default"}, false)
	})
}

// roleGrants checks that one of the role's rules names verb on resource.
func roleGrants(ctx context.Context, admin kubernetes.Interface, role, group, resource, verb string) error {
	cr, err := admin.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, r := range cr.Rules {
		if contains(r.APIGroups, group) && (contains(r.Resources, resource) || contains(r.Resources, "*")) && (contains(r.Verbs, verb) || contains(r.Verbs, "*")) {
			return nil
		}
	}
	return fmt.Errorf("%s does not grant %s %s in %q: %v", role, verb, resource, group, cr.Rules)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// selfReview asks, as the client's user, whether it may do what attrs say.
func selfReview(ctx context.Context, c kubernetes.Interface, attrs *authorizationv1.ResourceAttributes, want bool) error {
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if r.Status.Allowed != want {
		return fmt.Errorf("allowed = %v (%s), want %v", r.Status.Allowed, r.Status.Reason, want)
	}
	return nil
}

func TestRBACAccessReviewsAndImpersonation(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	_, dave := userClient(t, srv, "dave")
	podsInDefault := &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: "default"}

	// SelfSubjectAccessReview: what `kubectl auth can-i list pods` asks.
	if err := selfReview(ctx, dave, podsInDefault, false); err != nil {
		t.Fatal(err)
	}
	if err := selfReview(ctx, admin, podsInDefault, true); err != nil {
		t.Fatal(err)
	}
	mustCreate(t)(admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"}, Rules: podReader}, metav1.CreateOptions{}))
	mustCreate(t)(admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dave"},
			{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "default"}}}, metav1.CreateOptions{}))
	eventually(t, "dave may list pods", func() error { return selfReview(ctx, dave, podsInDefault, true) })

	// SubjectAccessReview about someone else, with the reason RBAC gives.
	sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "dave", ResourceAttributes: podsInDefault}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `RBAC: allowed by RoleBinding "readers/default" of Role "pod-reader" to User "dave"`; !sar.Status.Allowed || sar.Status.Reason != want {
		t.Errorf("SubjectAccessReview: %+v, want allowed with reason %q", sar.Status, want)
	}
	_, err = dave.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "dave", ResourceAttributes: podsInDefault}}, metav1.CreateOptions{})
	if err := wantForbidden(err, `subjectaccessreviews.authorization.k8s.io is forbidden: User "dave" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`); err != nil {
		t.Errorf("dave asking about others: %v", err)
	}
	_, err = admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: podsInDefault}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.user: Invalid value: \"\": at least one of user or group must be specified") {
		t.Errorf("review without a user: %v", err)
	}

	// LocalSubjectAccessReview: the namespace of the path and of the attributes agree.
	lsar, err := admin.AuthorizationV1().LocalSubjectAccessReviews("default").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:default:default", ResourceAttributes: podsInDefault}}, metav1.CreateOptions{})
	if err != nil || !lsar.Status.Allowed {
		t.Errorf("LocalSubjectAccessReview: %v %+v", err, lsar)
	}
	_, err = admin.AuthorizationV1().LocalSubjectAccessReviews("kube-system").Create(ctx, &authorizationv1.LocalSubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "dave", ResourceAttributes: podsInDefault}}, metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "spec.resourceAttributes.namespace must match namespace: kube-system") {
		t.Errorf("LocalSubjectAccessReview in another namespace: %v", err)
	}

	// SelfSubjectRulesReview: what `kubectl auth can-i --list` shows.
	rules, err := dave.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasResourceRule(rules.Status.ResourceRules, "pods", "list") || !hasResourceRule(rules.Status.ResourceRules, "selfsubjectaccessreviews", "create") {
		t.Errorf("dave's rules in default lack pods or selfsubjectaccessreviews: %+v", rules.Status.ResourceRules)
	}
	if len(rules.Status.NonResourceRules) == 0 {
		t.Errorf("dave's rules lack discovery's paths")
	}

	// Impersonation: the admin may act as the service account; dave may not.
	asSA := rest.CopyConfig(srv.AdminConfig)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:default:default"}
	sa := kubernetes.NewForConfigOrDie(asSA)
	if err := selfReview(ctx, sa, podsInDefault, true); err != nil {
		t.Errorf("as the service account: %v", err)
	}
	if err := selfReview(ctx, sa, &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods", Namespace: "default"}, false); err != nil {
		t.Errorf("as the service account: %v", err)
	}
	who, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := asJSON(who.Status.UserInfo), `{"username":"system:serviceaccount:default:default","groups":["system:serviceaccounts","system:serviceaccounts:default","system:authenticated"]}`; got != want {
		t.Errorf("impersonated user %s, want %s", got, want)
	}
	err = admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/pods").SetHeader("Impersonate-Group", "ops").Do(ctx).Error()
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "requested [Impersonate-Group] without impersonating a user") {
		t.Errorf("a group without a user: %v", err)
	}
	daveCfg, _ := userClient(t, srv, "dave")
	daveAsBob := rest.CopyConfig(daveCfg)
	daveAsBob.Impersonate = rest.ImpersonationConfig{UserName: "bob"}
	_, err = kubernetes.NewForConfigOrDie(daveAsBob).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err := wantForbidden(err, `users "bob" is forbidden: User "dave" cannot impersonate resource "users" in API group "" at the cluster scope`); err != nil {
		t.Errorf("dave impersonating: %v", err)
	}
}

func hasResourceRule(rules []authorizationv1.ResourceRule, resource, verb string) bool {
	for _, r := range rules {
		if contains(r.Resources, resource) && contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

func TestRBACEscalationPrevention(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	_, erin := userClient(t, srv, "erin")
	// Erin manages roles and bindings in default, and may read pods there.
	mustCreate(t)(admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "rbac-manager"}, Rules: append([]rbacv1.PolicyRule{
		{Verbs: []string{"create", "update", "get"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}},
	}, podReader...)}, metav1.CreateOptions{}))
	mustCreate(t)(admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "erin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "rbac-manager"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "erin"}}}, metav1.CreateOptions{}))
	eventually(t, "erin may create roles", func() error {
		return selfReview(ctx, erin, &authorizationv1.ResourceAttributes{Verb: "create", Group: rbacv1.GroupName, Resource: "roles", Namespace: "default"}, true)
	})

	if _, err := erin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "readers"}, Rules: podReader}, metav1.CreateOptions{}); err != nil {
		t.Errorf("a role within erin's own permissions: %v", err)
	}
	_, err := erin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}}, metav1.CreateOptions{})
	want := `roles.rbac.authorization.k8s.io "secrets" is forbidden: user "erin" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` +
		"\n" + `{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`
	if err := wantForbidden(err, want); err != nil {
		t.Errorf("a role beyond erin's permissions: %v", err)
	}
	_, err = erin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mine-now"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "erin"}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `rolebindings.rbac.authorization.k8s.io "mine-now" is forbidden: user "erin" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:`) {
		t.Errorf("binding cluster-admin: %v", err)
	}
	if _, err := erin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "readers"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "frank"}}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("binding a role erin holds: %v", err)
	}
}

// runKubectl runs the upstream kubectl in this process; a kubectl that would exit the
// process panics instead, and the panic becomes the returned failure.
func runKubectl(kubeconfig string, args ...string) (out, failure string) {
	var stdout, stderr bytes.Buffer
	cmdutil.BehaviorOnFatal(func(msg string, code int) { panic(fmt.Sprintf("exit %d: %s", code, msg)) })
	defer cmdutil.DefaultBehaviorOnFatal()
	defer func() {
		if r := recover(); r != nil {
			msg, ok := r.(string)
			if !ok {
				panic(r)
			}
			out, failure = stdout.String(), msg+stderr.String()
		}
	}()
	cmd := kubectlcmd.NewDefaultKubectlCommandWithArgs(kubectlcmd.KubectlOptions{
		Arguments:   append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...),
		ConfigFlags: genericclioptions.NewConfigFlags(true),
		IOStreams:   genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr},
	})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	if err := cmd.Execute(); err != nil {
		return stdout.String(), err.Error() + stderr.String()
	}
	return stdout.String(), ""
}

// kubectl auth can-i answers from the access reviews. (A "no" makes kubectl exit the
// process, so only "yes" answers are asked here; the reviews above cover "no".)
func TestKubectlAuthCanI(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	mustCreate(t)(admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}))
	mustCreate(t)(admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"}, Rules: podReader}, metav1.CreateOptions{}))
	mustCreate(t)(admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "default-sa"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: "default"}}}, metav1.CreateOptions{}))
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"auth", "can-i", "create", "pods"}, []string{"yes"}},
		{[]string{"auth", "can-i", "*", "*"}, []string{"yes"}},
		{[]string{"auth", "can-i", "list", "pods", "--as", "system:serviceaccount:default:default"}, []string{"yes"}},
		{[]string{"auth", "can-i", "--list"}, []string{"*.*", "[*]"}},
		{[]string{"auth", "can-i", "--list", "--as", "system:serviceaccount:default:default"}, []string{"pods", "[get list watch]", "selfsubjectaccessreviews.authorization.k8s.io", "/api/*"}},
	}
	for _, tt := range tests {
		var out, failure string
		eventually(t, strings.Join(tt.args, " "), func() error {
			out, failure = runKubectl(srv.AdminKubeconfig, tt.args...)
			if failure != "" {
				return fmt.Errorf("kubectl failed: %s", failure)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					return fmt.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			return nil
		})
	}
}

// A restart finds the default policy in place and writes nothing: the reconciliation
// at start is idempotent.
func TestRBACDefaultPolicyRestartWritesNothing(t *testing.T) {
	dir := t.TempDir()
	srv := apiserver.StartWithDir(t, dir)
	before := settledRevision(t, srv.AdminConfig)
	srv.Stop()
	srv = apiserver.StartWithDir(t, dir)
	if after := settledRevision(t, srv.AdminConfig); after != before {
		t.Errorf("revision %s after the restart, %s before", after, before)
	}
}

// settledRevision is the store's revision once a server has finished the writes it
// makes in the background after starting (the FlowSchemas' Dangling conditions among
// them): the first revision that a list reports unchanged for a second.
func settledRevision(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	client := kubernetes.NewForConfigOrDie(cfg)
	revision := func() string {
		list, err := client.RbacV1().ClusterRoles().List(context.Background(), metav1.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return list.ResourceVersion
	}
	last, since := revision(), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cur := revision(); cur != last {
			last, since = cur, time.Now()
		} else if time.Since(since) >= time.Second {
			return last
		}
	}
	t.Fatalf("the revision still moves 30 s after the start (at %s)", last)
	return ""
}
