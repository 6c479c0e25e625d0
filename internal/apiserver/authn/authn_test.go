package authn

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/apiserver/satoken"
	"mizzen/internal/registry"
)

// staticTokens accepts the tokens it maps to users and refuses the rest.
type staticTokens map[string]registry.User

func (s staticTokens) AuthenticateToken(_ context.Context, token string) (registry.User, bool, error) {
	if u, ok := s[token]; ok {
		return u, true, nil
	}
	return registry.User{}, false, errors.New("unknown token")
}

// whoami answers with the user the chain put in the context, and the request's
// Authorization and Impersonate-User headers as they reach it.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	u, ok := registry.UserFrom(r.Context())
	if !ok {
		http.Error(w, "no user", http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"user": u, "authorization": r.Header.Get("Authorization"), "impersonate": r.Header.Get("Impersonate-User")})
})

func writeStatus(w http.ResponseWriter, _ *http.Request, err error) {
	st := apierrors.NewInternalError(err).Status()
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	}
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

type seen struct {
	User          registry.User
	Authorization string
	Impersonate   string
}

func do(t *testing.T, h http.Handler, r *http.Request) (int, seen, string) {
	t.Helper()
	w, s := serve(t, h, r)
	return w.Code, s, w.Body.String()
}

// serve answers r with h, and what whoami saw when h let it through.
func serve(t *testing.T, h http.Handler, r *http.Request) (*httptest.ResponseRecorder, seen) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var s seen
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
			t.Fatalf("body %q: %v", w.Body.String(), err)
		}
	}
	return w, s
}

func withCert(r *http.Request, cn string, orgs ...string) *http.Request {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
	return r
}

func TestWithAuthentication(t *testing.T) {
	tokens := staticTokens{"good": {Name: "robot", Groups: []string{"bots", AuthenticatedGroup}}}
	h := WithAuthentication(whoami, Union{ClientCert{}, BearerToken(TokenUnion{tokens})}, func(p string) bool { return p == "/healthz" }, writeStatus)
	bearer := func(path, token string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return r
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		code int
		user registry.User
	}{
		{"a client certificate", withCert(httptest.NewRequest(http.MethodGet, "/api", nil), "alice", "devs"), 200,
			registry.User{Name: "alice", Groups: []string{"devs", AuthenticatedGroup}}},
		{"a certificate wins over a token beside it", withCert(bearer("/api", "good"), "alice"), 200,
			registry.User{Name: "alice", Groups: []string{AuthenticatedGroup}}},
		{"a bearer token", bearer("/api", "good"), 200, registry.User{Name: "robot", Groups: []string{"bots", AuthenticatedGroup}}},
		{"a refused token", bearer("/api", "bad"), 401, registry.User{}},
		{"a refused token on a public path", bearer("/healthz", "bad"), 401, registry.User{}},
		{"no credentials", httptest.NewRequest(http.MethodGet, "/api", nil), 401, registry.User{}},
		{"no credentials on a public path", httptest.NewRequest(http.MethodGet, "/healthz", nil), 200,
			registry.User{Name: AnonymousUser, Groups: []string{UnauthenticatedGroup}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, s, body := do(t, h, tc.req)
			if code != tc.code {
				t.Fatalf("code %d, want %d: %s", code, tc.code, body)
			}
			if code == 401 {
				var st metav1.Status
				if err := json.Unmarshal([]byte(body), &st); err != nil || st.Reason != metav1.StatusReasonUnauthorized || st.Message != "Unauthorized" {
					t.Errorf("refusal %s, want upstream's 401 Status", body)
				}
				return
			}
			if !reflect.DeepEqual(s.User, tc.user) {
				t.Errorf("user %+v, want %+v", s.User, tc.user)
			}
			if s.Authorization != "" {
				t.Errorf("the Authorization header went on: %q", s.Authorization)
			}
		})
	}
}

func TestBearerTokenOf(t *testing.T) {
	for header, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "Bearer  ": ""} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", header)
		if got, ok := BearerTokenOf(r); got != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", header, got, ok, want)
		}
	}
}

// policy allows what its rules list, as "verb resource/subresource name", and refuses
// the rest with a Forbidden naming the attributes.
type policy map[string]bool

func (p policy) authorize(_ context.Context, a authz.Attributes) error {
	key := a.Verb + " " + a.Resource
	if a.Subresource != "" {
		key += "/" + a.Subresource
	}
	key += " " + a.Name
	if a.Namespace != "" {
		key = a.Namespace + ": " + key
	}
	if p[key] {
		return nil
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.Group, Resource: a.Resource}, a.Name, fmt.Errorf("%s may not %s", a.User.Name, key))
}

func TestWithImpersonation(t *testing.T) {
	allowed := policy{
		"impersonate users bob":                   true,
		"impersonate groups ops":                  true,
		"impersonate userextras/scopes view":      true,
		"impersonate uids 42":                     true,
		"ns: impersonate serviceaccounts builder": true,
	}
	admin := registry.User{Name: "admin", Groups: []string{AuthenticatedGroup}}
	h := WithImpersonation(whoami, allowed.authorize, writeStatus)
	req := func(headers map[string][]string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		for k, vs := range headers {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		return r.WithContext(registry.WithUser(r.Context(), admin))
	}
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		code    int
		user    registry.User
		message string
	}{
		{"no impersonation", nil, 200, admin, ""},
		{"a user with a group, an extra and a UID", map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Group": {"ops"}, "Impersonate-Extra-Scopes": {"view"}, "Impersonate-Uid": {"42"}}, 200,
			registry.User{Name: "bob", UID: "42", Groups: []string{"ops", AuthenticatedGroup}, Extra: map[string][]string{"scopes": {"view"}}}, ""},
		{"a service account gets its groups", map[string][]string{"Impersonate-User": {"system:serviceaccount:ns:builder"}}, 200,
			registry.User{Name: "system:serviceaccount:ns:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns", AuthenticatedGroup}}, ""},
		{"a user not allowed", map[string][]string{"Impersonate-User": {"root"}}, 403, registry.User{}, "admin may not impersonate users root"},
		{"a group not allowed", map[string][]string{"Impersonate-User": {"bob"}, "Impersonate-Group": {"system:masters"}}, 403, registry.User{}, "admin may not impersonate groups system:masters"},
		{"a group without a user", map[string][]string{"Impersonate-Group": {"ops"}}, 400, registry.User{}, "requested [Impersonate-Group] without impersonating a user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, s := serve(t, h, req(tc.headers))
			code, body := w.Code, w.Body.String()
			if code != tc.code {
				t.Fatalf("code %d, want %d: %s", code, tc.code, body)
			}
			// Upstream sends nosniff with an authorization refusal, not with a bad request.
			if nosniff := w.Header().Get("X-Content-Type-Options") == "nosniff"; nosniff != (code == 403) {
				t.Errorf("answered %d with X-Content-Type-Options %q", code, w.Header().Get("X-Content-Type-Options"))
			}
			if code != 200 {
				if !strings.Contains(body, tc.message) {
					t.Errorf("refusal %s, want %q", body, tc.message)
				}
				return
			}
			if !reflect.DeepEqual(s.User, tc.user) {
				t.Errorf("user %+v, want %+v", s.User, tc.user)
			}
			if s.Impersonate != "" {
				t.Errorf("the Impersonate-User header went on: %q", s.Impersonate)
			}
		})
	}
}

// objects holds the metadata of the objects tokens are bound to, by "resource/ns/name".
type objects map[string]metav1.Object

func (o objects) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error) {
	if obj, ok := o[gvr.Resource+"/"+namespace+"/"+name]; ok {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func TestServiceAccountTokens(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := satoken.NewSigner(key, []string{"https://issuer.example"})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects{
		"serviceaccounts/ns/robot": &metav1.ObjectMeta{Name: "robot", Namespace: "ns", UID: types.UID("sa-uid")},
		"pods/ns/web":              &metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: types.UID("pod-uid")},
	}
	tokens := &ServiceAccountTokens{Signer: signer, Objects: objs}
	now := time.Now()
	sign := func(c satoken.Claims) string {
		t.Helper()
		c.Issuer, c.Subject = "https://issuer.example", satoken.Subject("ns", "robot")
		if c.Audience == nil {
			c.Audience = []string{"https://issuer.example"}
		}
		c.IssuedAt, c.NotBefore, c.Expiry = now.Unix(), now.Unix(), now.Add(time.Hour).Unix()
		tok, err := signer.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	sa := &satoken.KubernetesClaims{Namespace: "ns", ServiceAccount: satoken.Ref{Name: "robot", UID: "sa-uid"}}
	bound := *sa
	bound.Pod = &satoken.Ref{Name: "web", UID: "pod-uid"}
	gone := *sa
	gone.Pod = &satoken.Ref{Name: "old", UID: "old-uid"}
	stale := *sa
	stale.ServiceAccount.UID = "other"

	user, ok, err := tokens.AuthenticateToken(context.Background(), sign(satoken.Claims{Kubernetes: &bound}))
	if err != nil || !ok || user.Name != "system:serviceaccount:ns:robot" || user.UID != "sa-uid" ||
		!reflect.DeepEqual(user.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:ns", AuthenticatedGroup}) ||
		!reflect.DeepEqual(user.Extra["authentication.kubernetes.io/pod-name"], []string{"web"}) {
		t.Errorf("a pod-bound token: %+v %v %v", user, ok, err)
	}
	for name, tc := range map[string]struct {
		token string
		want  string
	}{
		"not a JWT":                    {"abc", ""},
		"for another audience":         {sign(satoken.Claims{Kubernetes: sa, Audience: []string{"elsewhere"}}), `token audiences ["elsewhere"] is invalid for the target audiences ["https://issuer.example"]`},
		"its pod is gone":              {sign(satoken.Claims{Kubernetes: &gone}), "service account token has been invalidated"},
		"its service account replaced": {sign(satoken.Claims{Kubernetes: &stale}), "service account UID (sa-uid) does not match claim (other)"},
		"without kubernetes claims":    {sign(satoken.Claims{}), "invalid bearer token"},
	} {
		_, ok, err := tokens.AuthenticateToken(context.Background(), tc.token)
		if ok || (tc.want == "") != (err == nil) || (err != nil && err.Error() != tc.want) {
			t.Errorf("%s: ok=%v err=%v, want refused with %q", name, ok, err, tc.want)
		}
	}
	// TokenReview asks for audiences of its own and learns which the token holds.
	_, granted, err := tokens.Review(context.Background(), sign(satoken.Claims{Kubernetes: sa, Audience: []string{"a", "b"}}), []string{"b", "c"})
	if err != nil || !reflect.DeepEqual(granted, []string{"b"}) {
		t.Errorf("review: granted %v, %v", granted, err)
	}
	// Without a signer every token is refused.
	if _, ok, err := (&ServiceAccountTokens{Objects: objs}).AuthenticateToken(context.Background(), sign(satoken.Claims{Kubernetes: sa})); ok || err == nil {
		t.Errorf("without a signer: ok=%v err=%v", ok, err)
	}
}

// countingTokens accepts the token "good" and counts the calls.
type countingTokens struct{ calls int }

func (c *countingTokens) AuthenticateToken(_ context.Context, token string) (registry.User, bool, error) {
	c.calls++
	if token != "good" {
		return registry.User{}, false, errors.New("refused")
	}
	return registry.User{Name: "robot", Groups: []string{"g"}}, true, nil
}

func TestCachedTokensRememberSuccessesForTheirTTL(t *testing.T) {
	inner := &countingTokens{}
	cache := NewCachedTokens(inner, 10*time.Second)
	now := time.Unix(1_800_000_000, 0)
	cache.now = func() time.Time { return now }
	ctx := context.Background()
	for range 3 {
		if u, ok, err := cache.AuthenticateToken(ctx, "good"); !ok || err != nil || u.Name != "robot" {
			t.Fatalf("good token: %+v %v %v", u, ok, err)
		}
	}
	if inner.calls != 1 {
		t.Errorf("the good token was checked %d times within the TTL, want once", inner.calls)
	}
	for range 2 {
		if _, ok, err := cache.AuthenticateToken(ctx, "bad"); ok || err == nil {
			t.Fatalf("bad token accepted: %v %v", ok, err)
		}
	}
	if inner.calls != 3 {
		t.Errorf("%d checks after two refusals, want 3: a refusal must not be cached", inner.calls)
	}
	now = now.Add(10 * time.Second)
	if _, ok, _ := cache.AuthenticateToken(ctx, "good"); !ok || inner.calls != 4 {
		t.Errorf("after the TTL: ok %v, %d checks, want the token checked again", ok, inner.calls)
	}
	now = now.Add(30 * time.Second)
	_, _, _ = cache.AuthenticateToken(ctx, "good")
	if len(cache.users) != 1 {
		t.Errorf("%d cached users after the sweep, want 1", len(cache.users))
	}
}
