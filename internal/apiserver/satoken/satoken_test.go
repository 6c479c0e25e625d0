package satoken

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testSigner(t *testing.T) *Signer {
	t.Helper()
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(key, "https://issuer.test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignAndVerify(t *testing.T) {
	s := testSigner(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := NewSigner(other, "https://issuer.test")
	now := time.Unix(1_800_000_000, 0)
	claims := Claims{Subject: Subject("ns", "robot"), Audience: []string{"api"}, IssuedAt: now.Unix(), NotBefore: now.Unix(),
		Expiry: now.Add(10 * time.Minute).Unix(), Kubernetes: &KubernetesClaims{Namespace: "ns", ServiceAccount: Ref{Name: "robot", UID: "u1"}}}
	token, err := s.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	foreignToken, _ := foreign.Sign(claims)
	parts := strings.Split(token, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://issuer.test","sub":"system:serviceaccount:ns:admin","aud":["api"]}`)) + "." + parts[2]

	cases := []struct {
		name      string
		token     string
		audiences []string
		at        time.Time
		want      error
	}{
		{"valid", token, []string{"api"}, now.Add(time.Minute), nil},
		{"one of several audiences", token, []string{"other", "api"}, now, nil},
		{"within the clock skew after expiry", token, []string{"api"}, now.Add(10*time.Minute + 30*time.Second), nil},
		{"expired", token, []string{"api"}, now.Add(12 * time.Minute), ErrExpired},
		{"not yet valid", token, []string{"api"}, now.Add(-5 * time.Minute), ErrNotYet},
		{"wrong audience", token, []string{"vault"}, now, ErrAudience},
		{"signed by another key", foreignToken, []string{"api"}, now, ErrNotOurs},
		{"payload changed", tampered, []string{"api"}, now, ErrNotOurs},
		{"not a JWT", "abc.def", []string{"api"}, now, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Verify(tc.token, tc.audiences, tc.at)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify error = %v, want %v", err, tc.want)
			}
			if err == nil && (got.Subject != "system:serviceaccount:ns:robot" || got.Issuer != "https://issuer.test" || got.Kubernetes.ServiceAccount.UID != "u1") {
				t.Errorf("claims = %+v", got)
			}
		})
	}
}

func TestKeyIsReusedAndPublished(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sa.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Fatal("a second load made a new key")
	}
	s, _ := NewSigner(k1, "https://issuer.test")
	token, _ := s.Sign(Claims{Audience: []string{"a"}})
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	var h struct{ Alg, Kid string }
	_ = json.Unmarshal(hdr, &h)
	var set struct {
		Keys []struct{ Kid, Alg, Kty, Use, E string }
	}
	b, _ := s.JWKS()
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 || set.Keys[0].Kid != h.Kid || h.Alg != "RS256" || set.Keys[0].Kty != "RSA" || set.Keys[0].E != "AQAB" || set.Keys[0].Use != "sig" {
		t.Errorf("token header %+v, key set %s", h, b)
	}
}
