package integration

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/apiserver/satoken"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/testing/apiserver"
)

// TestServiceAccountKeyRotationToECDSA moves a cluster's signing key from RSA to
// ECDSA as upstream's flags do: the new key signs (ES256), the old one's public key in
// --service-account-key-file keeps its tokens valid, both are published, and a key
// the server was not given is refused.
func TestServiceAccountKeyRotationToECDSA(t *testing.T) {
	dir := t.TempDir()
	oldKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	newKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	strangerKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	oldPub, _ := x509.MarshalPKIXPublicKey(&oldKey.PublicKey)
	newDER, _ := x509.MarshalECPrivateKey(newKey)
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	srv := apiserver.StartWithOptions(t, func(o *core.Options) {
		o.DisableAdmissionPlugins = nil
		o.ServiceAccountSigningKeyFile = write("sa-ec.key", "EC PRIVATE KEY", newDER)
		o.ServiceAccountKeyFiles = []string{write("sa-old.pub", "PUBLIC KEY", oldPub)}
	})
	cfg, c := srv.AdminConfig, kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()
	sa, tr := robotWithToken(ctx, t, c)
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(tr.Status.Token, ".")[0])
	if !strings.Contains(string(header), `"alg":"ES256"`) {
		t.Errorf("token header %s: not signed with the ECDSA key", header)
	}
	now := time.Now()
	claims := satoken.Claims{Issuer: core.DefaultServiceAccountIssuer, Subject: satoken.Subject("default", "robot"), Audience: []string{core.DefaultServiceAccountIssuer},
		IssuedAt: now.Unix(), NotBefore: now.Unix(), Expiry: now.Add(time.Hour).Unix(),
		Kubernetes: &satoken.KubernetesClaims{Namespace: "default", ServiceAccount: satoken.Ref{Name: "robot", UID: string(sa.UID)}}}
	for name, tc := range map[string]struct {
		token string
		ok    bool
	}{
		"the server's own (ES256)":   {tr.Status.Token, true},
		"the previous key's (RS256)": {sign(t, oldKey, claims), true},
		"a key the server never had": {sign(t, strangerKey, claims), false},
	} {
		_, err := tokenClient(cfg, tc.token).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if tc.ok && err != nil || !tc.ok && (err == nil || !strings.Contains(err.Error(), "Unauthorized")) {
			t.Errorf("%s: listing pods: %v", name, err)
		}
	}

	body, err := c.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct{ Alg, Kty, Crv string }
	}
	if err := json.Unmarshal(body, &set); err != nil || len(set.Keys) != 2 || set.Keys[0].Alg != "ES256" || set.Keys[0].Crv != "P-256" || set.Keys[1].Alg != "RS256" {
		t.Errorf("jwks %s (%v)", body, err)
	}
}

// sign makes a token of the claims (with their issuer) with a key of the test's, as
// another apiserver of the cluster holding that key would.
func sign(t *testing.T, key crypto.Signer, claims satoken.Claims) string {
	t.Helper()
	s, err := satoken.NewSigner(key, []string{claims.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	token, err := s.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestServiceAccountKeyFileAlone keeps what --service-account-key-file meant before
// --service-account-signing-key-file: alone, its one private key signs; and two of
// them without a signing key are refused before anything starts.
func TestServiceAccountKeyFileAlone(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	path := filepath.Join(t.TempDir(), "sa.key")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := core.Start(context.Background(), core.Options{DataDir: t.TempDir(), BindAddress: "127.0.0.1", SecurePort: 0, ServiceAccountKeyFiles: []string{path, path}})
	if err == nil || !strings.Contains(err.Error(), "--service-account-signing-key-file") {
		t.Errorf("two key files without a signing key: %v", err)
	}

	srv := apiserver.StartWithOptions(t, func(o *core.Options) { o.ServiceAccountKeyFiles = []string{path} })
	c := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(tr.Status.Token, ".")[0])
	if !strings.Contains(string(header), `"alg":"ES384"`) {
		t.Errorf("token header %s: not signed with the one key file's P-384 key", header)
	}
}

// TestServiceAccountIssuers runs a server with --service-account-issuer given twice,
// as a cluster moving to a new issuer does: its tokens carry the first issuer and, by
// default, every issuer as audience; its discovery document names the first; a token
// of the same key with the second issuer authenticates, one with a third does not.
func TestServiceAccountIssuers(t *testing.T) {
	const first, second, third = "https://new.example", "https://old.example", "https://stranger.example"
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(key)
	keyFile := filepath.Join(t.TempDir(), "sa.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := apiserver.StartWithOptions(t, func(o *core.Options) {
		o.ServiceAccountSigningKeyFile = keyFile
		o.ServiceAccountIssuers = []string{first, second}
	})
	cfg, c := srv.AdminConfig, kubernetes.NewForConfigOrDie(srv.AdminConfig)
	ctx := context.Background()
	sa, tr := robotWithToken(ctx, t, c)
	if got := jwtClaims(t, tr.Status.Token); got["iss"] != first || asJSON(got["aud"]) != asJSON([]string{first, second}) {
		t.Errorf("TokenRequest's token: iss %v, aud %v; want iss %s, aud both issuers", got["iss"], got["aud"], first)
	}

	now := time.Now()
	// tokenOf is a token of the server's key as another apiserver would sign it.
	tokenOf := func(issuer, audience string) string {
		return sign(t, key, satoken.Claims{Issuer: issuer, Subject: satoken.Subject("default", "robot"), Audience: []string{audience},
			IssuedAt: now.Unix(), NotBefore: now.Unix(), Expiry: now.Add(time.Hour).Unix(),
			Kubernetes: &satoken.KubernetesClaims{Namespace: "default", ServiceAccount: satoken.Ref{Name: "robot", UID: string(sa.UID)}}})
	}
	for _, tc := range []struct {
		name  string
		token string
		ok    bool
	}{
		{"the server's own", tr.Status.Token, true},
		{"the second issuer's", tokenOf(second, second), true},
		{"a third issuer's", tokenOf(third, third), false},
		// The audience is one the server accepts; only the issuer is wrong.
		{"a third issuer's for the first issuer's audience", tokenOf(third, first), false},
	} {
		_, err := tokenClient(cfg, tc.token).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if tc.ok && err != nil || !tc.ok && !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: listing pods: %v", tc.name, err)
		}
		review, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tc.token}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st := review.Status; st.Authenticated != tc.ok || tc.ok && st.User.Username != "system:serviceaccount:default:robot" {
			t.Errorf("%s: TokenReview status %s", tc.name, asJSON(st))
		}
	}

	body, err := c.CoreV1().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	var discovery struct{ Issuer string }
	if err != nil || json.Unmarshal(body, &discovery) != nil || discovery.Issuer != first {
		t.Errorf("openid-configuration %s (%v): want issuer %s", body, err, first)
	}
}

// robotWithToken makes the service account default/robot, lets it list pods, and
// returns it with a token the server issued for it.
func robotWithToken(ctx context.Context, t *testing.T, c kubernetes.Interface) (*corev1.ServiceAccount, *authenticationv1.TokenRequest) {
	t.Helper()
	sa, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grantPodList(ctx, t, c, "default", "robot")
	tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sa, tr
}
