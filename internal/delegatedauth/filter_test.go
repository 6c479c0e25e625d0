package delegatedauth

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPIServer knows one token ("good", of user "alice" in "readers") and allows
// get on /metrics to "readers"; it counts the reviews it is asked.
func fakeAPIServer() (*fake.Clientset, *int, *int) {
	client := fake.NewClientset()
	var tokenReviews, accessReviews int
	client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tokenReviews++
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "good" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"readers", AuthenticatedGroup}}}
		}
		return true, tr, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		accessReviews++
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		attrs := sar.Spec.NonResourceAttributes
		for _, g := range sar.Spec.Groups {
			if g == "readers" && attrs != nil && attrs.Path == "/metrics" && attrs.Verb == "get" {
				sar.Status.Allowed = true
			}
		}
		return true, sar, nil
	})
	return client, &tokenReviews, &accessReviews
}

func TestFilter(t *testing.T) {
	client, tokenReviews, accessReviews := fakeAPIServer()
	d := New(client, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h := d.Filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) }))
	for _, tc := range []struct {
		name, method, path, token string
		code                      int
		message                   string
	}{
		{"health is open", http.MethodGet, "/healthz", "", 200, ""},
		{"readyz is open", http.MethodGet, "/readyz", "", 200, ""},
		{"only the exact health paths are open", http.MethodGet, "/healthz/leaderElection", "", 403, `forbidden: User "system:anonymous" cannot get path "/healthz/leaderElection"`},
		{"anonymous metrics", http.MethodGet, "/metrics", "", 403, `forbidden: User "system:anonymous" cannot get path "/metrics"`},
		{"a bad token", http.MethodGet, "/metrics", "bad", 401, "Unauthorized"},
		{"a bad token on health", http.MethodGet, "/healthz", "bad", 401, "Unauthorized"},
		{"a reader", http.MethodGet, "/metrics", "good", 200, ""},
		{"a reader again (cached)", http.MethodGet, "/metrics", "good", 200, ""},
		{"the verb is the method", http.MethodPost, "/metrics", "good", 403, `forbidden: User "alice" cannot post path "/metrics"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("code = %d (%s), want %d", w.Code, w.Body, tc.code)
			}
			if tc.code == 200 {
				return
			}
			var st metav1.Status
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" || st.APIVersion != "v1" {
				t.Fatalf("body %q is not a Status: %v", w.Body, err)
			}
			if st.Message != tc.message || st.Code != int32(tc.code) || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("got %d %q (%s), want %d %q", st.Code, st.Message, w.Header().Get("Content-Type"), tc.code, tc.message)
			}
		})
	}
	// "good" was reviewed once, "bad" once (the failure cached too); the reader's get
	// on /metrics asked once, post once, and the anonymous twice (two paths).
	if *tokenReviews != 2 {
		t.Errorf("%d TokenReviews, want 2 (answers cached)", *tokenReviews)
	}
	if *accessReviews != 4 {
		t.Errorf("%d SubjectAccessReviews, want 4 (answers cached)", *accessReviews)
	}
}

func TestMastersNeedNoReview(t *testing.T) {
	client, _, accessReviews := fakeAPIServer()
	a := NewAuthorizer(client.AuthorizationV1().SubjectAccessReviews())
	d, err := a.Authorize(t.Context(), &User{Name: "admin", Groups: []string{"system:masters", AuthenticatedGroup}}, "get", "/debug/pprof/")
	if err != nil || !d.Allowed || *accessReviews != 0 {
		t.Errorf("system:masters: %+v %v after %d reviews, want allowed without one", d, err, *accessReviews)
	}
}

// TestAuthorizeResource asks about an API resource (as the kubelet guards its
// endpoints as nodes/<subresource>): the review carries the resource attributes, and
// answers are cached per question.
func TestAuthorizeResource(t *testing.T) {
	client := fake.NewClientset()
	var asked []authorizationv1.ResourceAttributes
	client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		a := sar.Spec.ResourceAttributes
		asked = append(asked, *a)
		sar.Status.Allowed = sar.Spec.User == "prometheus" && a.Resource == "nodes" && a.Subresource == "metrics" && a.Name == "node-a"
		return true, sar, nil
	})
	a := NewAuthorizer(client.AuthorizationV1().SubjectAccessReviews())
	u := &User{Name: "prometheus", Groups: []string{AuthenticatedGroup}}
	metrics := authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "metrics", Name: "node-a"}
	proxy := metrics
	proxy.Subresource = "proxy"
	for _, tc := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{{metrics, true}, {proxy, false}, {metrics, true}, {proxy, false}} {
		d, err := a.AuthorizeResource(t.Context(), u, tc.attrs)
		if err != nil || d.Allowed != tc.want {
			t.Errorf("%+v: %+v %v, want allowed %v", tc.attrs, d, err, tc.want)
		}
	}
	if len(asked) != 2 || asked[0] != metrics || asked[1] != proxy {
		t.Errorf("asked %+v, want metrics then proxy once each", asked)
	}
}

func TestDisableAnonymous(t *testing.T) {
	client, _, _ := fakeAPIServer()
	d := New(client, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.DisableAnonymous = true
	if u, err := d.Authenticate(httptest.NewRequest(http.MethodGet, "/metrics", nil)); err == nil {
		t.Errorf("a request without credentials authenticated as %+v, want refused", u)
	}
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	r.Header.Set("Authorization", "Bearer good")
	if u, err := d.Authenticate(r); err != nil || u.Name != "alice" {
		t.Errorf("a good token: %+v %v", u, err)
	}
}
