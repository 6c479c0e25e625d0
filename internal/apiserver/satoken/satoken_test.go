package satoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func testSigner(t *testing.T) *Signer {
	t.Helper()
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(key, []string{"https://issuer.test"})
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
	foreign, _ := NewSigner(other, []string{"https://issuer.test"})
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
	if !k1.(*rsa.PrivateKey).Equal(k2) {
		t.Fatal("a second load made a new key")
	}
	s, _ := NewSigner(k1, []string{"https://issuer.test"})
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

// TestECDSAKeys signs with each curve upstream accepts, checks the signature with an
// independent JWT library against the published key, and rotates from an RSA key: a
// token of the old key still verifies while its public key is listed.
func TestECDSAKeys(t *testing.T) {
	old := testSigner(t)
	now := time.Now()
	claims := Claims{Subject: Subject("ns", "robot"), Audience: []string{"api"}, IssuedAt: now.Unix(), NotBefore: now.Unix(),
		Expiry: now.Add(10 * time.Minute).Unix(), Kubernetes: &KubernetesClaims{Namespace: "ns", ServiceAccount: Ref{Name: "robot", UID: "u1"}}}
	oldToken, err := old.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	for curve, alg := range map[elliptic.Curve]string{elliptic.P256(): "ES256", elliptic.P384(): "ES384", elliptic.P521(): "ES512"} {
		t.Run(alg, func(t *testing.T) {
			key, err := ecdsa.GenerateKey(curve, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			der, _ := x509.MarshalECPrivateKey(key)
			path := filepath.Join(t.TempDir(), "sa.key")
			if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
				t.Fatal(err)
			}
			loaded, err := LoadOrCreateKey(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewSigner(loaded, []string{"https://issuer.test"}, old.key.Public())
			if err != nil {
				t.Fatal(err)
			}
			token, err := s.Sign(claims)
			if err != nil {
				t.Fatal(err)
			}
			for name, tok := range map[string]string{"new": token, "rotated out": oldToken} {
				if got, err := s.Verify(tok, []string{"api"}, now); err != nil || got.Subject != claims.Subject {
					t.Errorf("%s key's token: %+v, %v", name, got, err)
				}
			}
			if _, err := old.Verify(token, []string{"api"}, now); !errors.Is(err, ErrNotOurs) {
				t.Errorf("the old signer alone verified the new key's token: %v", err)
			}

			b, _ := s.JWKS()
			var set struct {
				Keys []struct{ Kid, Alg, Kty, Crv, X, Y string }
			}
			if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) != 2 {
				t.Fatalf("key set %s: %v", b, err)
			}
			published := set.Keys[0]
			if published.Alg != alg || published.Kty != "EC" || published.Crv != curve.Params().Name || set.Keys[1].Alg != "RS256" {
				t.Errorf("key set %s", b)
			}
			x, _ := base64.RawURLEncoding.DecodeString(published.X)
			y, _ := base64.RawURLEncoding.DecodeString(published.Y)
			fromJWKS := &ecdsa.PublicKey{Curve: curve, X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
			parsed, err := jwt.Parse(token, func(tok *jwt.Token) (any, error) {
				if tok.Header["kid"] != published.Kid {
					return nil, fmt.Errorf("kid %v, published %s", tok.Header["kid"], published.Kid)
				}
				return fromJWKS, nil
			}, jwt.WithValidMethods([]string{alg}), jwt.WithIssuer("https://issuer.test"), jwt.WithAudience("api"))
			if err != nil || !parsed.Valid {
				t.Errorf("golang-jwt did not accept the token with the published key: %v", err)
			}

			doc, _ := s.OpenIDConfiguration("https://x/openid/v1/jwks")
			var discovery struct {
				Algs []string `json:"id_token_signing_alg_values_supported"`
			}
			if err := json.Unmarshal(doc, &discovery); err != nil || !slices.Equal(discovery.Algs, []string{alg, "RS256"}) {
				t.Errorf("discovery %s", doc)
			}
		})
	}
}

func TestLoadPublicKeys(t *testing.T) {
	dir := t.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalECPrivateKey(ecKey)
	pkix, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	template := &x509.Certificate{SerialNumber: big.NewInt(1), NotAfter: time.Now().Add(time.Hour)}
	cert, err := x509.CreateCertificate(rand.Reader, template, template, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, blocks ...*pem.Block) string {
		var b []byte
		for _, block := range blocks {
			b = append(b, pem.EncodeToMemory(block)...)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	all := write("all.pem",
		&pem.Block{Type: "PUBLIC KEY", Bytes: pkix},
		&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)},
		&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER},
		&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)},
		&pem.Block{Type: "CERTIFICATE", Bytes: cert})
	keys, err := LoadPublicKeys(all)
	if err != nil || len(keys) != 5 {
		t.Fatalf("LoadPublicKeys = %d keys, %v", len(keys), err)
	}
	for i, want := range []crypto.PublicKey{&ecKey.PublicKey, &rsaKey.PublicKey, &ecKey.PublicKey, &rsaKey.PublicKey, &rsaKey.PublicKey} {
		if !want.(interface{ Equal(crypto.PublicKey) bool }).Equal(keys[i]) {
			t.Errorf("key %d = %T, not the one written", i, keys[i])
		}
	}

	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(edKey)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	p224DER, _ := x509.MarshalECPrivateKey(p224)
	for name, tc := range map[string]struct {
		path string
		want string
	}{
		"no key":  {write("empty.pem", &pem.Block{Type: "NOTHING", Bytes: []byte("x")}), "no RSA or ECDSA key"},
		"ed25519": {write("ed.pem", &pem.Block{Type: "PRIVATE KEY", Bytes: edDER}), "RSA or ECDSA keys only"},
		"P-224":   {write("p224.pem", &pem.Block{Type: "EC PRIVATE KEY", Bytes: p224DER}), "only P-256, P-384 and P-521"},
	} {
		if _, err := LoadPublicKeys(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: LoadPublicKeys error %v, want %q", name, err, tc.want)
		}
		if name != "no key" {
			if _, err := LoadOrCreateKey(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: LoadOrCreateKey error %v, want %q", name, err, tc.want)
			}
		}
	}
}

// BenchmarkSignAndVerify compares the key types a cluster can choose: a token request
// signs once, and a request bearing the token verifies it (the authenticator caches
// the result for a while).
func BenchmarkSignAndVerify(b *testing.B) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	claims := Claims{Subject: Subject("ns", "robot"), Audience: []string{"api"}, IssuedAt: now.Unix(), NotBefore: now.Unix(),
		Expiry: now.Add(time.Hour).Unix(), Kubernetes: &KubernetesClaims{Namespace: "ns", ServiceAccount: Ref{Name: "robot", UID: "u1"}}}
	for name, key := range map[string]crypto.Signer{"RS256": rsaKey, "ES256": ecKey} {
		s, err := NewSigner(key, []string{"https://issuer.test"})
		if err != nil {
			b.Fatal(err)
		}
		token, _ := s.Sign(claims)
		b.Run(name+"/sign", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Sign(claims); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/verify", func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Verify(token, []string{"api"}, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzVerify feeds Verify arbitrary tokens: it must not panic, and nothing but the
// signer's own tokens may pass (the seeds include one, with its parts rearranged).
func FuzzVerify(f *testing.F) {
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s, err := NewSigner(ecKey, []string{"https://issuer.test"})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := s.Sign(Claims{Subject: "x", Audience: []string{"api"}})
	parts := strings.Split(good, ".")
	f.Add(good)
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"x"}`)) + "." + parts[1] + "." + parts[2])
	f.Add("..")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.Verify(token, []string{"api"}, time.Now())
		if err == nil && token != good {
			// Only a token whose signed parts are the good one's can pass; ECDSA signatures
			// have no second encoding here (fixed-size r and s).
			if p := strings.Split(token, "."); p[0]+"."+p[1] != parts[0]+"."+parts[1] {
				t.Fatalf("Verify accepted %q: %+v", token, c)
			}
		}
	})
}

// TestSeveralIssuers follows upstream's repeated --service-account-issuer: tokens are
// issued (and discovery published) with the first issuer, and a token of the same key
// naming any of the issuers verifies, while one naming another issuer does not.
func TestSeveralIssuers(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(key, []string{"https://new.test", "https://old.test"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Issuer() != "https://new.test" || !slices.Equal(s.Issuers(), []string{"https://new.test", "https://old.test"}) {
		t.Errorf("Issuer() = %q, Issuers() = %q", s.Issuer(), s.Issuers())
	}
	now := time.Now()
	claims := Claims{Subject: Subject("ns", "robot"), Audience: []string{"api"}, IssuedAt: now.Unix(), NotBefore: now.Unix(),
		Expiry: now.Add(10 * time.Minute).Unix(), Kubernetes: &KubernetesClaims{Namespace: "ns", ServiceAccount: Ref{Name: "robot", UID: "u1"}}}
	signWith := func(issuer string) string {
		t.Helper()
		other, err := NewSigner(key, []string{issuer})
		if err != nil {
			t.Fatal(err)
		}
		token, err := other.Sign(claims)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	own, err := s.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, iss string
		want             error
	}{
		{"its own, with the first issuer", own, "https://new.test", nil},
		{"the second issuer's", signWith("https://old.test"), "https://old.test", nil},
		{"an issuer not listed", signWith("https://stranger.test"), "", ErrNotOurs},
	} {
		got, err := s.Verify(tc.token, []string{"api"}, now)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify error = %v, want %v", tc.name, err, tc.want)
		}
		if err == nil && got.Issuer != tc.iss {
			t.Errorf("%s: iss = %q, want %q", tc.name, got.Issuer, tc.iss)
		}
	}
	doc, err := s.OpenIDConfiguration("https://x/openid/v1/jwks")
	var discovery struct{ Issuer string }
	if err != nil || json.Unmarshal(doc, &discovery) != nil || discovery.Issuer != "https://new.test" {
		t.Errorf("discovery %s (%v): want the first issuer", doc, err)
	}
}

// TestValidateIssuers holds upstream's rules and messages for --service-account-issuer.
func TestValidateIssuers(t *testing.T) {
	for _, tc := range []struct {
		issuers []string
		want    string // the whole error; "" for none
	}{
		{nil, ""},
		{[]string{"https://kubernetes.default.svc.cluster.local"}, ""},
		{[]string{"https://a.example", "https://b.example", "kubernetes/serviceaccount"}, ""},
		{[]string{"https://a.example/x,y"}, ""}, // a comma is part of the value
		{[]string{""}, "service-account-issuer should not be an empty string"},
		{[]string{"https://a.example", "https://a.example"}, `service-account-issuer "https://a.example" is already specified`},
		{[]string{":8443"}, `service-account-issuer ":8443" contained a ':' but was not a valid URL: parse ":8443": missing protocol scheme`},
		{[]string{"a b:c"}, `service-account-issuer "a b:c" contained a ':' but was not a valid URL: parse "a b:c": first path segment in URL cannot contain colon`},
		{[]string{"x", "", "x"}, `[service-account-issuer should not be an empty string, service-account-issuer "x" is already specified]`},
	} {
		err := ValidateIssuers(tc.issuers)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("ValidateIssuers(%q) = %v, want %q", tc.issuers, err, tc.want)
		}
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, issuers := range [][]string{nil, {"https://a.example", "https://a.example"}} {
		if _, err := NewSigner(key, issuers); err == nil {
			t.Errorf("NewSigner(%q) accepted the issuers", issuers)
		}
	}
}
