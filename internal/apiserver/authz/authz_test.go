package authz

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
)

// verbs allows the verbs it lists, for anyone, with its name as the reason; it refuses
// the rest with refusal as the reason.
type verbs struct {
	name    string
	allow   map[string]bool
	refusal string
}

func (v verbs) Authorize(_ context.Context, a Attributes) (bool, string) {
	if v.allow[a.Verb] {
		return true, v.name
	}
	return false, v.refusal
}

func (v verbs) RulesFor(registry.User, string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{Verbs: []string{v.name}}}
}

// follower is an authorizer that follows one resource.
type follower struct{ verbs }

func (follower) Resources() []schema.GroupResource {
	return []schema.GroupResource{{Resource: "nodes"}}
}
func (follower) Replace(schema.GroupResource, []runtime.Object) {}
func (follower) Apply(runtime.Object, bool)                     {}

func writeStatus(w http.ResponseWriter, _ *http.Request, err error) {
	st := apierrors.NewInternalError(err).Status()
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	}
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

func TestWithAuthorization(t *testing.T) {
	reached := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ })
	alice := registry.User{Name: "alice"}
	attrs := map[string]Attributes{
		"/api/v1/namespaces/ns/pods/web/log": {User: alice, Verb: "get", ResourceRequest: true, Resource: "pods", Subresource: "log", Namespace: "ns", Name: "web"},
		"/apis/apps/v1/deployments":          {User: alice, Verb: "list", ResourceRequest: true, Group: "apps", Version: "v1", Resource: "deployments"},
		"/metrics":                           {User: alice, Verb: "get", Path: "/metrics"},
		"/api/v1/namespaces/ns/pods":         {User: alice, Verb: "create", ResourceRequest: true, Resource: "pods", Namespace: "ns"},
	}
	h := WithAuthorization(next, verbs{allow: map[string]bool{"create": true}, refusal: "no rule"}, func(r *http.Request) Attributes { return attrs[r.URL.Path] }, writeStatus)
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods/web/log": `pods/log "web" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the namespace "ns": no rule`,
		"/apis/apps/v1/deployments":          `deployments.apps is forbidden: User "alice" cannot list resource "deployments" in API group "apps" at the cluster scope: no rule`,
		"/metrics":                           `forbidden: User "alice" cannot get path "/metrics": no rule`,
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		var st metav1.Status
		_ = json.Unmarshal(w.Body.Bytes(), &st)
		if w.Code != http.StatusForbidden || st.Reason != metav1.StatusReasonForbidden || st.Message != want {
			t.Errorf("%s: %d %q, want 403 %q", path, w.Code, st.Message, want)
		}
		if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: refused with X-Content-Type-Options %q, want upstream's nosniff", path, got)
		}
	}
	if reached != 0 {
		t.Fatalf("a refused request reached the handler")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/ns/pods", nil))
	if w.Code != http.StatusOK || reached != 1 {
		t.Errorf("an allowed request: %d, reached %d", w.Code, reached)
	}
	if got := w.Header().Get("X-Content-Type-Options"); got != "" {
		t.Errorf("an allowed request got X-Content-Type-Options %q from the authorization step", got)
	}
	// Without an authorizer every request goes on.
	WithAuthorization(next, nil, func(*http.Request) Attributes { return Attributes{} }, writeStatus).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if reached != 2 {
		t.Errorf("without an authorizer the request did not go on")
	}
}

func TestNonResourceVerb(t *testing.T) {
	for method, want := range map[string]string{"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "OPTIONS": "options"} {
		if got := NonResourceVerb(method); got != want {
			t.Errorf("%s: %q, want %q", method, got, want)
		}
	}
}

func TestUnion(t *testing.T) {
	node := follower{verbs{name: "node", allow: map[string]bool{"get": true}, refusal: "not a node"}}
	rbac := verbs{name: "rbac", allow: map[string]bool{"list": true}}
	u := Union{node, Union{rbac}}
	for verb, want := range map[string]struct {
		ok     bool
		reason string
	}{
		"get":    {true, "node"},
		"list":   {true, "rbac"},
		"delete": {false, "not a node"},
	} {
		if ok, reason := u.Authorize(context.Background(), Attributes{Verb: verb}); ok != want.ok || reason != want.reason {
			t.Errorf("%s: %v %q, want %v %q", verb, ok, reason, want.ok, want.reason)
		}
	}
	if rules := u.RulesFor(registry.User{}, "ns"); len(rules) != 2 || rules[0].Verbs[0] != "node" || rules[1].Verbs[0] != "rbac" {
		t.Errorf("rules %v, want node's then rbac's", rules)
	}
	if fs := Followers(u); len(fs) != 1 || !reflect.DeepEqual(fs[0], Follower(node)) {
		t.Errorf("followers %v, want the node authorizer", fs)
	}
	if got, ok := Find[verbs](u); !ok || got.name != "rbac" {
		t.Errorf("Find: %v %v, want the nested rbac member", got, ok)
	}
	if _, ok := Find[verbs](nil); ok {
		t.Errorf("Find in no authorizer found one")
	}
	if fs := Followers(rbac); len(fs) != 0 {
		t.Errorf("a lone authorizer that follows nothing: %v", fs)
	}
}
