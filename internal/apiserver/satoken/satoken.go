// Package satoken issues and verifies service account tokens: JSON Web Tokens signed
// with RS256 by the cluster's service account key, carrying upstream's claims (iss,
// sub, aud, exp, iat, nbf, jti and the kubernetes.io private claim), and publishes the
// verification key as a JWK set for OpenID discovery.
package satoken

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
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
	"time"
)

// Ref names an object a token is bound to.
type Ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// KubernetesClaims is the "kubernetes.io" private claim.
type KubernetesClaims struct {
	Namespace      string `json:"namespace"`
	ServiceAccount Ref    `json:"serviceaccount"`
	Pod            *Ref   `json:"pod,omitempty"`
	Secret         *Ref   `json:"secret,omitempty"`
	Node           *Ref   `json:"node,omitempty"`
	// WarnAfter is when a token whose lifetime the server extended would have expired.
	WarnAfter *int64 `json:"warnafter,omitempty"`
}

// Claims of a service account token.
type Claims struct {
	Issuer     string            `json:"iss"`
	Subject    string            `json:"sub"`
	Audience   []string          `json:"aud"`
	Expiry     int64             `json:"exp"`
	IssuedAt   int64             `json:"iat"`
	NotBefore  int64             `json:"nbf"`
	ID         string            `json:"jti,omitempty"`
	Kubernetes *KubernetesClaims `json:"kubernetes.io,omitempty"`
}

// Subject is the token subject and user name of a service account.
func Subject(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// Signer signs and verifies tokens with one RSA key.
type Signer struct {
	key    *rsa.PrivateKey
	keyID  string
	issuer string
}

// NewSigner returns a signer for the issuer. The key ID is the unpadded base64url
// SHA-256 of the public key's DER encoding, as upstream derives it.
func NewSigner(key *rsa.PrivateKey, issuer string) (*Signer, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &Signer{key: key, keyID: base64.RawURLEncoding.EncodeToString(sum[:]), issuer: issuer}, nil
}

// Issuer is the iss claim of the tokens this signer issues.
func (s *Signer) Issuer() string { return s.issuer }

// LoadOrCreateKey reads an RSA private key in PEM, or creates a 2048-bit one there.
func LoadOrCreateKey(path string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%s: no PEM data", path)
		}
		if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
			return k, nil
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: not an RSA key", path)
		}
		return rk, nil
	}
	if !os.IsNotExist(err) {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// Sign encodes and signs the claims, with this signer's issuer.
func (s *Signer) Sign(c Claims) (string, error) {
	c.Issuer = s.issuer
	h, err := json.Marshal(header{Alg: "RS256", Kid: s.keyID})
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signing := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Errors of Verify.
var (
	ErrNotOurs   = errors.New("not a service account token of this issuer")
	ErrExpired   = errors.New("token has expired")
	ErrNotYet    = errors.New("token is not valid yet")
	ErrAudience  = errors.New("token audiences do not match")
	ErrMalformed = errors.New("malformed token")
)

// LooksLikeJWT reports whether a bearer token has the three parts of a JWT.
func LooksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

// Verify checks the token's signature and issuer, that it is valid at now (with a
// minute of clock skew, as upstream allows), and that it names one of the audiences.
// A valid token for other audiences returns its claims with ErrAudience.
func (s *Signer) Verify(token string, audiences []string, now time.Time) (*Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, ErrMalformed
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, ErrMalformed
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil || h.Alg != "RS256" {
		return nil, ErrNotOurs
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, ErrMalformed
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return nil, ErrNotOurs
	}
	pb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(pb, &c); err != nil {
		return nil, ErrMalformed
	}
	if c.Issuer != s.issuer {
		return nil, ErrNotOurs
	}
	const leeway = 60
	t := now.Unix()
	if c.Expiry != 0 && t > c.Expiry+leeway {
		return nil, ErrExpired
	}
	if c.NotBefore != 0 && t < c.NotBefore-leeway {
		return nil, ErrNotYet
	}
	if !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(audiences, a) }) {
		return &c, ErrAudience // the claims, so that the caller can say which audiences it has
	}
	return &c, nil
}

// UnmarshalJSON accepts the aud claim as a string or a list, as RFC 7519 allows.
func (c *Claims) UnmarshalJSON(b []byte) error {
	type plain Claims
	var raw struct {
		plain
		Audience json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = Claims(raw.plain)
	c.Audience = nil
	if len(raw.Audience) == 0 {
		return nil
	}
	var one string
	if err := json.Unmarshal(raw.Audience, &one); err == nil {
		c.Audience = []string{one}
		return nil
	}
	return json.Unmarshal(raw.Audience, &c.Audience)
}

// JWKS is the public key set, as /openid/v1/jwks serves it.
func (s *Signer) JWKS() ([]byte, error) {
	type jwk struct {
		Use string `json:"use"`
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		N   string `json:"n"`
		E   string `json:"e"`
	}
	pub := s.key.PublicKey
	return json.Marshal(struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{{Use: "sig", Kty: "RSA", Kid: s.keyID, Alg: "RS256",
		N: base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())}}})
}

// OpenIDConfiguration is the discovery document of /.well-known/openid-configuration.
func (s *Signer) OpenIDConfiguration(jwksURI string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"issuer":                                s.issuer,
		"jwks_uri":                              jwksURI,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
}
