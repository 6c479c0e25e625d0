package integration

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/jointoken"
	"mizzen/internal/testing/apiserver"
)

// bearerClient is a client presenting token, trusting the cluster CA.
func bearerClient(admin *rest.Config, token string) kubernetes.Interface {
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	return kubernetes.NewForConfigOrDie(cfg)
}

// TestJoinAuthentication: a joining machine reads cluster-info anonymously and
// checks the CA; its bootstrap token then authenticates as upstream's do, and an
// expired, unknown or mistyped one is 401.
func TestJoinAuthentication(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	caPEM := srv.AdminConfig.TLSClientConfig.CAData

	// cluster-info is the anonymous user's; nothing else in kube-public is.
	anonymous := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(srv.AdminConfig))
	if _, err := anonymous.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{}); err != nil {
		t.Fatalf("anonymous get cluster-info: %v", err)
	}
	mustCreate(t)(admin.CoreV1().ConfigMaps("kube-public").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "kube-public"}}, metav1.CreateOptions{}))
	_, err := anonymous.CoreV1().ConfigMaps("kube-public").Get(ctx, "other", metav1.GetOptions{})
	if err := wantForbidden(err, `configmaps "other" is forbidden: User "system:anonymous" cannot get resource "configmaps" in API group "" in the namespace "kube-public"`); err != nil {
		t.Error(err)
	}
	_, err = anonymous.CoreV1().ConfigMaps("kube-public").List(ctx, metav1.ListOptions{})
	if err := wantForbidden(err, ""); err != nil {
		t.Errorf("anonymous list kube-public configmaps: %v", err)
	}

	tok, err := jointoken.Create(ctx, admin, caPEM, jointoken.Options{Role: jointoken.RoleAgent, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tok.FetchCA(ctx, srv.URL)
	if err != nil {
		t.Fatalf("FetchCA: %v", err)
	}
	if string(got) != string(caPEM) {
		t.Error("FetchCA returned another CA than the cluster's")
	}
	wrong := tok
	wrong.CAHash = "0000000000000000000000000000000000000000000000000000000000000000"
	if _, err := wrong.FetchCA(ctx, srv.URL); !errors.Is(err, jointoken.ErrCAMismatch) {
		t.Errorf("FetchCA with another CA's hash: %v, want %v", err, jointoken.ErrCAMismatch)
	}

	// The token authenticates as upstream's bootstrap tokens do.
	joiner := bearerClient(srv.AdminConfig, tok.Bearer())
	who, err := joiner.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami with the token: %v", err)
	}
	u := who.Status.UserInfo
	wantGroups := []string{"system:bootstrappers", "system:bootstrappers:mizzen:agent", "system:authenticated"}
	if u.Username != "system:bootstrap:"+tok.ID || !slices.Equal(u.Groups, wantGroups) {
		t.Errorf("the token is %s %v, want system:bootstrap:%s %v", u.Username, u.Groups, tok.ID, wantGroups)
	}
	review, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok.Bearer()}}, metav1.CreateOptions{})
	if err != nil || !review.Status.Authenticated || review.Status.User.Username != "system:bootstrap:"+tok.ID {
		t.Errorf("TokenReview of the token: %+v, %v", review.Status, err)
	}
	// It may file CSRs (system:node-bootstrapper) and nothing more.
	if _, err := joiner.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("bootstrapper listing CSRs: %v", err)
	}
	_, err = joiner.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	if err := wantForbidden(err, `secrets is forbidden: User "system:bootstrap:`+tok.ID+`" cannot list resource "secrets" in API group "" in the namespace "kube-system"`); err != nil {
		t.Error(err)
	}

	// Bad credentials are 401, even where the anonymous user is let in.
	bad := tok
	bad.Secret = "0000000000000000"
	for name, c := range map[string]kubernetes.Interface{
		"wrong secret": bearerClient(srv.AdminConfig, bad.Bearer()),
		"unknown id":   bearerClient(srv.AdminConfig, "zzzzzz.0123456789abcdef"),
		"garbage":      bearerClient(srv.AdminConfig, "not-a-token"),
	} {
		if _, err := c.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: %v, want 401", name, err)
		}
		if err := c.CoreV1().RESTClient().Get().AbsPath("/healthz").Do(ctx).Error(); !apierrors.IsUnauthorized(err) {
			t.Errorf("%s on /healthz: %v, want 401", name, err)
		}
	}

	// An expired token is refused; so is a deleted one, once the cache has seen it go.
	expired, err := jointoken.Generate(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	s, err := expired.BootstrapSecret(jointoken.Options{Role: jointoken.RoleAgent, TTL: time.Second}, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t)(admin.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}))
	if _, err := bearerClient(srv.AdminConfig, expired.Bearer()).CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("expired token: %v, want 401", err)
	}
	if _, err := jointoken.Delete(ctx, admin, tok.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted token is refused", func() error {
		_, err := joiner.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			return errors.New("still accepted")
		}
		return nil
	})
}
