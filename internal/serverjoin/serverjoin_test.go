package serverjoin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/jointoken"
	"mizzen/internal/pki"
)

// joinServer serves cluster-info and the join endpoint with a certificate of ca.
func joinServer(t *testing.T, ca *pki.CA, h *Handler) string {
	t.Helper()
	serving, err := ca.IssueServing("server", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := serving.TLS()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Path {
			h.ServeHTTP(w, r)
			return
		}
		cm, _ := jointoken.ClusterInfo("https://server:6443", ca.CertPEM)
		_ = json.NewEncoder(w).Encode(cm)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	want := &Secrets{Files: map[string][]byte{"tls/ca.key": []byte("the key")}, EtcdClientURLs: []string{"https://10.0.0.1:2379"}}
	h := &Handler{Client: client, Log: slog.New(slog.DiscardHandler), Collect: func(context.Context) (*Secrets, error) { return want, nil }}
	url := joinServer(t, ca, h)

	server, err := jointoken.Create(ctx, client, ca.CertPEM, jointoken.Options{Role: jointoken.RoleServer})
	if err != nil {
		t.Fatal(err)
	}
	got, gotCA, err := Fetch(ctx, url, server)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Files["tls/ca.key"]) != "the key" || got.EtcdClientURLs[0] != want.EtcdClientURLs[0] || string(gotCA) != string(ca.CertPEM) {
		t.Errorf("received %+v", got)
	}

	agent, _ := jointoken.Create(ctx, client, ca.CertPEM, jointoken.Options{Role: jointoken.RoleAgent})
	expiring, _ := jointoken.Create(ctx, client, ca.CertPEM, jointoken.Options{Role: jointoken.RoleServer, TTL: time.Minute})
	wrongSecret := server
	wrongSecret.Secret = strings.Repeat("x", 16)
	unknown := server
	unknown.ID = "zzzzzz"
	other, _ := pki.LoadOrCreateCA(t.TempDir(), "ca", "other-ca")
	otherCluster, _ := jointoken.Generate(other.CertPEM)
	for _, tc := range []struct {
		name string
		tok  jointoken.Token
		now  time.Time
		want string
	}{
		{"agent token", agent, time.Now(), "not servers"},
		{"wrong secret", wrongSecret, time.Now(), "secret is wrong"},
		{"deleted token", unknown, time.Now(), "unknown join token"},
		{"expired token", expiring, time.Now().Add(time.Hour), "expired"},
		{"another cluster's token", otherCluster, time.Now(), "does not match the token's CA hash"},
	} {
		h.Now = func() time.Time { return tc.now }
		if _, _, err := Fetch(ctx, url, tc.tok); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	h.Now = nil
	if _, _, err := Fetch(ctx, url, otherCluster); !errors.Is(err, jointoken.ErrCAMismatch) {
		t.Errorf("another cluster's token: %v", err)
	}
}

func TestSealedNeedsTheSecret(t *testing.T) {
	s, err := seal("0123456789abcdef", []byte("ca key"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(s.Ciphertext), "ca key") {
		t.Error("plaintext visible in the sealed answer")
	}
	if got, err := s.open("0123456789abcdef"); err != nil || string(got) != "ca key" {
		t.Errorf("open = %q, %v", got, err)
	}
	if _, err := s.open("fedcba9876543210"); err == nil {
		t.Error("another secret opened the answer")
	}
}
