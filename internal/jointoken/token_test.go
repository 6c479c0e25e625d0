package jointoken

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/pki"
)

func testCA(t *testing.T, name string) []byte {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), name, name)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

func TestParseRoundTrip(t *testing.T) {
	tok, err := Generate(testCA(t, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(" " + tok.String() + "\n")
	if err != nil || got != tok {
		t.Fatalf("Parse(%q) = %+v, %v; want %+v", tok.String(), got, err, tok)
	}
	if id, secret, ok := ParseBearer(tok.Bearer()); !ok || id != tok.ID || secret != tok.Secret {
		t.Errorf("ParseBearer(%q) = %q %q %v", tok.Bearer(), id, secret, ok)
	}
}

func TestParseRefusesMalformedTokens(t *testing.T) {
	hash := strings.Repeat("a", 64)
	for _, s := range []string{
		"",
		"abcdef.0123456789abcdef", // no CA hash: the server could not be verified
		"K10" + hash,
		"K10" + hash[:63] + "::abcdef.0123456789abcdef",
		"K10" + strings.ToUpper(hash) + "::abcdef.0123456789abcdef",
		"K10" + hash + "::abcde.0123456789abcdef",
		"K10" + hash + "::abcdef.0123456789abcde",
		"K10" + hash + "::ABCDEF.0123456789abcdef",
		"K10" + hash + "::server:password",
	} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted a malformed token", s)
		}
	}
}

func TestVerifyCA(t *testing.T) {
	ours, theirs := testCA(t, "ours"), testCA(t, "theirs")
	tok, err := Generate(ours)
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.VerifyCA(ours); err != nil {
		t.Errorf("own CA refused: %v", err)
	}
	if err := tok.VerifyCA(theirs); !errors.Is(err, ErrCAMismatch) {
		t.Errorf("another cluster's CA: %v, want ErrCAMismatch", err)
	}
	if err := tok.VerifyCA([]byte("not pem")); err == nil {
		t.Error("garbage accepted as a CA")
	}
}

func TestSecretRoundTrip(t *testing.T) {
	tok, _ := Generate(testCA(t, "ca"))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s, err := tok.BootstrapSecret(Options{Role: RoleServer, Description: "for db-2", TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "bootstrap-token-"+tok.ID || s.Namespace != "kube-system" || string(s.Type) != "bootstrap.kubernetes.io/token" {
		t.Errorf("secret %s/%s of type %s", s.Namespace, s.Name, s.Type)
	}
	info, secret, err := Read(s)
	if err != nil {
		t.Fatal(err)
	}
	if secret != tok.Secret || info.ID != tok.ID || info.Description != "for db-2" || info.Role() != RoleServer {
		t.Errorf("read back %+v secret %q", info, secret)
	}
	if !info.Expires.Equal(now.Add(time.Hour)) || info.Expired(now) || !info.Expired(now.Add(time.Hour)) {
		t.Errorf("expiry %v", info.Expires)
	}
	if strings.Join(info.Usages, ",") != "authentication,signing" {
		t.Errorf("usages %v", info.Usages)
	}
	forever, _ := tok.BootstrapSecret(Options{Role: RoleAgent}, now)
	if info, _, _ := Read(forever); info.Expired(now.Add(100*365*24*time.Hour)) || info.Role() != RoleAgent {
		t.Errorf("a token without TTL expires or lost its role: %+v", info)
	}
	if _, err := tok.BootstrapSecret(Options{Role: "admin"}, now); err == nil {
		t.Error("unknown role accepted")
	}
	s.Data["token-id"] = []byte("zzzzzz")
	if _, _, err := Read(s); err == nil {
		t.Error("a secret whose name and token-id disagree was read as a token")
	}
}

func TestCreateListDelete(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	ca := testCA(t, "ca")
	a, err := Create(ctx, client, ca, Options{Role: RoleAgent, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(ctx, client, ca, Options{Role: RoleServer})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := List(ctx, client)
	if err != nil || len(infos) != 2 {
		t.Fatalf("List = %v, %v", infos, err)
	}
	if id, err := Delete(ctx, client, a.String()); err != nil || id != a.ID {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, client, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(ctx, client, b.ID); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("deleting a deleted token: %v", err)
	}
	if infos, _ := List(ctx, client); len(infos) != 0 {
		t.Errorf("left after delete: %v", infos)
	}
}

func TestFetchCAChecksTheHash(t *testing.T) {
	ca := testCA(t, "ca")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" || r.Header.Get("Authorization") != "" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		cm, _ := ClusterInfo("https://server:6443", ca)
		_ = json.NewEncoder(w).Encode(cm)
	}))
	defer srv.Close()
	tok, _ := Generate(ca)
	got, err := tok.FetchCA(context.Background(), srv.URL)
	if err != nil || string(got) != string(ca) {
		t.Fatalf("FetchCA = %d bytes, %v", len(got), err)
	}
	other, _ := Generate(testCA(t, "other"))
	if _, err := other.FetchCA(context.Background(), srv.URL); !errors.Is(err, ErrCAMismatch) {
		t.Errorf("a token of another cluster: %v, want ErrCAMismatch", err)
	}
	if _, err := tok.FetchCA(context.Background(), "http://"+strings.TrimPrefix(srv.URL, "https://")); err == nil {
		t.Error("plain http accepted")
	}
}
