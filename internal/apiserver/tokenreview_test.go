package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

func TestTokenReview(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	sa, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Spec:       v1.PodSpec{ServiceAccountName: "robot", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := func(audiences []string, bound *authenticationv1.BoundObjectReference) string {
		t.Helper()
		tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, BoundObjectRef: bound},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	plain := token(nil, nil)
	podBound := token(nil, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
	forVault := token([]string{"vault", "api"}, nil)

	robotGroups := []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}
	tests := []struct {
		name          string
		token         string
		audiences     []string
		wantAuth      bool
		wantAudiences []string // nil: the server's own, whatever it is
		wantExtra     []string // keys besides credential-id
		wantError     string   // substring of status.error
	}{
		{name: "service account token", token: plain, wantAuth: true},
		{name: "token bound to a pod", token: podBound, wantAuth: true,
			wantExtra: []string{"authentication.kubernetes.io/pod-name", "authentication.kubernetes.io/pod-uid"}},
		{name: "garbage", token: "not-a-token", wantError: "invalid bearer token"},
		{name: "broken signature", token: plain + "x", wantError: "invalid bearer token"},
		{name: "audiences asked for are intersected", token: forVault, audiences: []string{"vault", "other"}, wantAuth: true, wantAudiences: []string{"vault"}},
		{name: "token for other audiences", token: forVault, audiences: []string{"other"}, wantError: `token audiences ["vault" "api"] is invalid for the target audiences ["other"]`},
		{name: "token for other audiences than the server's", token: forVault, wantError: "is invalid for the target audiences"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
				Spec: authenticationv1.TokenReviewSpec{Token: tt.token, Audiences: tt.audiences},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st := got.Status
			if st.Authenticated != tt.wantAuth {
				t.Fatalf("authenticated = %v (error %q), want %v", st.Authenticated, st.Error, tt.wantAuth)
			}
			if !tt.wantAuth {
				if !strings.Contains(st.Error, tt.wantError) || st.User.Username != "" || len(st.Audiences) != 0 {
					t.Errorf("status %+v, want no user and an error with %q", st, tt.wantError)
				}
				return
			}
			if st.User.Username != "system:serviceaccount:default:robot" || st.User.UID != string(sa.UID) || !slices.Equal(st.User.Groups, robotGroups) {
				t.Errorf("user %+v, want robot (uid %s) in %v", st.User, sa.UID, robotGroups)
			}
			if id := st.User.Extra["authentication.kubernetes.io/credential-id"]; len(id) != 1 || !strings.HasPrefix(id[0], "JTI=") {
				t.Errorf("credential-id %v, want one JTI=", id)
			}
			for _, k := range tt.wantExtra {
				if len(st.User.Extra[k]) != 1 {
					t.Errorf("extra %s = %v, want one value", k, st.User.Extra[k])
				}
			}
			if tt.wantExtra != nil && (st.User.Extra["authentication.kubernetes.io/pod-name"][0] != pod.Name || st.User.Extra["authentication.kubernetes.io/pod-uid"][0] != string(pod.UID)) {
				t.Errorf("pod extra %v, want %s %s", st.User.Extra, pod.Name, pod.UID)
			}
			if tt.wantAudiences != nil && !slices.Equal(st.Audiences, tt.wantAudiences) || len(st.Audiences) == 0 {
				t.Errorf("audiences %v, want %v", st.Audiences, tt.wantAudiences)
			}
		})
	}

	t.Run("empty token", func(t *testing.T) {
		_, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "token is required") {
			t.Errorf("err = %v, want 400 token is required", err)
		}
	})

	t.Run("raw JSON POST is answered and not stored", func(t *testing.T) {
		body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","metadata":{"name":"mine"},"spec":{"token":"` + plain + `"}}`
		var code int
		raw, err := c.AuthenticationV1().RESTClient().Post().AbsPath("/apis/authentication.k8s.io/v1/tokenreviews").
			SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).StatusCode(&code).Raw()
		if err != nil {
			t.Fatal(err)
		}
		var got authenticationv1.TokenReview
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if code != http.StatusCreated || got.Kind != "TokenReview" || got.APIVersion != "authentication.k8s.io/v1" || !got.Status.Authenticated {
			t.Errorf("status %d, %s %s authenticated %v; want 201 and an authenticated TokenReview", code, got.APIVersion, got.Kind, got.Status.Authenticated)
		}
		err = c.AuthenticationV1().RESTClient().Get().AbsPath("/apis/authentication.k8s.io/v1/tokenreviews").Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("GET of the collection: %v, want 405", err)
		}
		err = c.AuthenticationV1().RESTClient().Get().AbsPath("/apis/authentication.k8s.io/v1/tokenreviews/mine").Do(ctx).Error()
		if !apierrors.IsNotFound(err) {
			t.Errorf("GET of the review: %v, want 404", err)
		}
	})

	t.Run("self subject review", func(t *testing.T) {
		anon := rest.AnonymousClientConfig(cfg)
		anon.BearerToken = podBound
		for _, tc := range []struct {
			name       string
			client     kubernetes.Interface
			wantUser   string
			wantUID    string
			wantGroups []string
			wantExtra  []string
		}{
			{name: "client certificate", client: c, wantUser: "system:admin", wantGroups: []string{"system:masters", "system:authenticated"}},
			{name: "pod-bound token", client: kubernetes.NewForConfigOrDie(anon), wantUser: "system:serviceaccount:default:robot", wantUID: string(sa.UID), wantGroups: robotGroups,
				wantExtra: []string{"authentication.kubernetes.io/credential-id", "authentication.kubernetes.io/pod-name", "authentication.kubernetes.io/pod-uid"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := tc.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				u := got.Status.UserInfo
				if u.Username != tc.wantUser || u.UID != tc.wantUID || !slices.Equal(u.Groups, tc.wantGroups) {
					t.Errorf("user %+v, want %s (uid %q) in %v", u, tc.wantUser, tc.wantUID, tc.wantGroups)
				}
				var keys []string
				for k := range u.Extra {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				if !slices.Equal(keys, tc.wantExtra) {
					t.Errorf("extra keys %v, want %v", keys, tc.wantExtra)
				}
			})
		}
	})

	t.Run("discovery", func(t *testing.T) {
		list, err := c.Discovery().ServerResourcesForGroupVersion("authentication.k8s.io/v1")
		if err != nil {
			t.Fatal(err)
		}
		_, lists, err := c.Discovery().ServerGroupsAndResources()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []metav1.APIResource{
			{Name: "selfsubjectreviews", Kind: "SelfSubjectReview"},
			{Name: "tokenreviews", Kind: "TokenReview"},
		} {
			i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want.Name })
			if i < 0 {
				t.Fatalf("authentication.k8s.io/v1 resources %v lack %s", list.APIResources, want.Name)
			}
			if r := list.APIResources[i]; r.Kind != want.Kind || r.Namespaced || !slices.Equal(r.Verbs, []string{"create"}) {
				t.Errorf("%s %+v, want cluster-scoped %s with verbs [create]", want.Name, r, want.Kind)
			}
			found := false
			for _, l := range lists {
				for _, r := range l.APIResources {
					if l.GroupVersion == "authentication.k8s.io/v1" && r.Name == want.Name {
						found = r.Kind == want.Kind && slices.Equal(r.Verbs, []string{"create"}) && !r.Namespaced
					}
				}
			}
			if !found {
				t.Errorf("aggregated discovery lacks a cluster-scoped %s with verbs [create]", want.Name)
			}
		}
	})
}
