// Package satoken issues and verifies service account tokens: JSON Web Tokens signed
// by the cluster's service account key (RS256, or ES256/384/512 for an ECDSA key),
// carrying upstream's claims (iss, sub, aud, exp, iat, nbf, jti and the kubernetes.io
// private claim), and publishes the verification keys as a JWK set for OpenID discovery.
package satoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
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
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
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

// Signer signs tokens with one private key and verifies them with its public key
// and any others the cluster still accepts (keys being rotated out), as upstream's
// --service-account-signing-key-file and --service-account-key-file do.
type Signer struct {
	key    crypto.Signer
	signAs verifier
	keys   []verifier
	// issuers are upstream's repeated --service-account-issuer: the first is the iss
	// of the tokens this signer issues, and a token of any of them is accepted, so
	// that a cluster can move to a new issuer while tokens of the old one are in use.
	issuers []string
}

// verifier is a public key that verifies tokens, with its JWS algorithm and key ID.
type verifier struct {
	pub   crypto.PublicKey
	alg   string
	keyID string
}

// NewSigner returns a signer with an RSA or ECDSA (P-256, P-384, P-521) key, which
// signs with RS256 or ES256/384/512 as upstream picks them; tokens signed by any key
// of also verify as well. A key ID is the unpadded base64url SHA-256 of the public
// key's DER encoding, as upstream derives it. Its tokens carry the first of issuers
// (at least one, valid by ValidateIssuers); tokens of any of them verify.
func NewSigner(key crypto.Signer, issuers []string, also ...crypto.PublicKey) (*Signer, error) {
	if len(issuers) == 0 {
		return nil, errors.New("a service account token signer needs an issuer")
	}
	if err := ValidateIssuers(issuers); err != nil {
		return nil, err
	}
	own, err := newVerifier(key.Public())
	if err != nil {
		return nil, err
	}
	s := &Signer{key: key, signAs: own, keys: []verifier{own}, issuers: slices.Clone(issuers)}
	for _, pub := range also {
		v, err := newVerifier(pub)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(s.keys, func(k verifier) bool { return k.keyID == v.keyID }) {
			s.keys = append(s.keys, v)
		}
	}
	return s, nil
}

func newVerifier(pub crypto.PublicKey) (verifier, error) {
	alg, err := algorithm(pub)
	if err != nil {
		return verifier{}, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return verifier{}, err
	}
	sum := sha256.Sum256(der)
	return verifier{pub: pub, alg: alg, keyID: base64.RawURLEncoding.EncodeToString(sum[:])}, nil
}

// algorithm is the JWS algorithm upstream signs with for a key of this type and size.
func algorithm(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return "RS256", nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ES256", nil
		case elliptic.P384():
			return "ES384", nil
		case elliptic.P521():
			return "ES512", nil
		}
		return "", fmt.Errorf("ECDSA key on curve %s: only P-256, P-384 and P-521 sign service account tokens", k.Curve.Params().Name)
	}
	return "", fmt.Errorf("a %T cannot sign service account tokens: RSA or ECDSA keys only", pub)
}

// hashes of the JWS algorithms.
var hashes = map[string]crypto.Hash{"RS256": crypto.SHA256, "ES256": crypto.SHA256, "ES384": crypto.SHA384, "ES512": crypto.SHA512}

// Issuer is the iss claim of the tokens this signer issues: the first issuer.
func (s *Signer) Issuer() string { return s.issuers[0] }

// Issuers are every issuer whose tokens verify, the signing one first. Upstream's
// default API audiences (without --api-audiences) are all of them, and its token
// authenticator accepts any (JWTTokenAuthenticator in pkg/serviceaccount/jwt.go).
func (s *Signer) Issuers() []string { return slices.Clone(s.issuers) }

// ValidateIssuers checks a list of --service-account-issuer values by upstream's rules,
// in their order and words (BuiltInAuthenticationOptions.Validate in kube-apiserver's
// pkg/kubeapiserver/options/authentication.go): a value containing ':' must parse as a
// URL (url.Parse, nothing stricter), none may be empty, and none may repeat. Like
// upstream it reports every bad value, as one aggregate error.
func ValidateIssuers(issuers []string) error {
	var errs []error
	seen := map[string]bool{}
	for _, issuer := range issuers {
		if strings.Contains(issuer, ":") {
			if _, err := url.Parse(issuer); err != nil {
				errs = append(errs, fmt.Errorf("service-account-issuer %q contained a ':' but was not a valid URL: %v", issuer, err))
				continue
			}
		}
		if issuer == "" {
			errs = append(errs, errors.New("service-account-issuer should not be an empty string"))
			continue
		}
		if seen[issuer] {
			errs = append(errs, fmt.Errorf("service-account-issuer %q is already specified", issuer))
			continue
		}
		seen[issuer] = true
	}
	return utilerrors.NewAggregate(errs)
}

// LoadOrCreateKey reads a private key in PEM (RSA in PKCS #1 or #8, ECDSA in SEC 1 or
// PKCS #8), or creates a 2048-bit RSA one there, as upstream's installers do.
func LoadOrCreateKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		block, _ := pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("%s: no PEM data", path)
		}
		key, err := parsePrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if _, err := algorithm(key.Public()); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return key, nil
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

func parsePrivateKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.New("not an RSA or ECDSA private key in PKCS #1, SEC 1 or PKCS #8")
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T is not a signing key", k)
	}
	return signer, nil
}

// LoadPublicKeys reads every key of a PEM file, as upstream's --service-account-key-file
// does: public keys (PKIX or PKCS #1), private keys (their public halves) and
// certificates (their subjects' keys), RSA or ECDSA.
func LoadPublicKeys(path string) ([]crypto.PublicKey, error) {
	rest, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		var pub crypto.PublicKey
		switch block.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				pub = cert.PublicKey
			}
		case "RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY":
			var key crypto.Signer
			if key, err = parsePrivateKey(block.Bytes); err == nil {
				pub = key.Public()
			}
		default:
			continue
		}
		if err == nil {
			_, err = algorithm(pub)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, block.Type, err)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no RSA or ECDSA key in PEM", path)
	}
	return keys, nil
}

type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// Sign encodes and signs the claims, with this signer's (first) issuer.
func (s *Signer) Sign(c Claims) (string, error) {
	c.Issuer = s.issuers[0]
	h, err := json.Marshal(header{Alg: s.signAs.alg, Kid: s.signAs.keyID})
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signing := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	hash := hashes[s.signAs.alg]
	digest := hash.New()
	digest.Write([]byte(signing))
	sum := digest.Sum(nil)
	var sig []byte
	switch key := s.key.(type) {
	case *ecdsa.PrivateKey:
		// JWS wants r and s as two fixed-size big-endian integers (RFC 7518 §3.4),
		// not the ASN.1 sequence crypto.Signer returns.
		r, ss, err := ecdsa.Sign(rand.Reader, key, sum)
		if err != nil {
			return "", err
		}
		size := coordinateSize(key.Curve)
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		ss.FillBytes(sig[size:])
	default:
		if sig, err = s.key.Sign(rand.Reader, sum, hash); err != nil {
			return "", err
		}
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// verify reports whether sig signs the message with one of the signer's keys for the
// algorithm: the one the key ID names first, then the others, since upstream's
// verifier does not require a key ID.
func (s *Signer) verify(alg, kid, message string, sig []byte) bool {
	hash, ok := hashes[alg]
	if !ok {
		return false
	}
	digest := hash.New()
	digest.Write([]byte(message))
	sum := digest.Sum(nil)
	check := func(k verifier) bool {
		if k.alg != alg {
			return false
		}
		switch pub := k.pub.(type) {
		case *rsa.PublicKey:
			return rsa.VerifyPKCS1v15(pub, hash, sum, sig) == nil
		case *ecdsa.PublicKey:
			size := coordinateSize(pub.Curve)
			if len(sig) != 2*size {
				return false
			}
			return ecdsa.Verify(pub, sum, new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:]))
		}
		return false
	}
	if i := slices.IndexFunc(s.keys, func(k verifier) bool { return k.keyID == kid }); i >= 0 && check(s.keys[i]) {
		return true
	}
	return slices.ContainsFunc(s.keys, func(k verifier) bool { return k.keyID != kid && check(k) })
}

// Errors of Verify.
var (
	ErrNotOurs   = errors.New("not a service account token of these issuers")
	ErrExpired   = errors.New("token has expired")
	ErrNotYet    = errors.New("token is not valid yet")
	ErrAudience  = errors.New("token audiences do not match")
	ErrMalformed = errors.New("malformed token")
)

// LooksLikeJWT reports whether a bearer token has the three parts of a JWT.
func LooksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

// Verify checks the token's signature and issuer (any of the signer's), that it is
// valid at now (with a minute of clock skew, as upstream allows), and that it names one
// of the audiences. A valid token for other audiences returns its claims with
// ErrAudience.
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
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, ErrNotOurs
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, ErrMalformed
	}
	if !s.verify(h.Alg, h.Kid, parts[0]+"."+parts[1], sig) {
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
	if !slices.Contains(s.issuers, c.Issuer) {
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

// JWKS is the public key set, as /openid/v1/jwks serves it: every key that verifies.
func (s *Signer) JWKS() ([]byte, error) {
	type jwk struct {
		Use string `json:"use"`
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Crv string `json:"crv,omitempty"`
		Alg string `json:"alg"`
		N   string `json:"n,omitempty"`
		E   string `json:"e,omitempty"`
		X   string `json:"x,omitempty"`
		Y   string `json:"y,omitempty"`
	}
	b64 := base64.RawURLEncoding.EncodeToString
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, k := range s.keys {
		key := jwk{Use: "sig", Kid: k.keyID, Alg: k.alg}
		switch pub := k.pub.(type) {
		case *rsa.PublicKey:
			key.Kty, key.N, key.E = "RSA", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
		case *ecdsa.PublicKey:
			size := coordinateSize(pub.Curve)
			key.Kty, key.Crv = "EC", pub.Curve.Params().Name
			key.X, key.Y = b64(pub.X.FillBytes(make([]byte, size))), b64(pub.Y.FillBytes(make([]byte, size)))
		}
		set.Keys = append(set.Keys, key)
	}
	return json.Marshal(set)
}

// OpenIDConfiguration is the discovery document of /.well-known/openid-configuration.
// Its issuer is the first, the one tokens are issued with, as upstream publishes
// ServiceAccountIssuerURL = Issuers[0] (pkg/controlplane/apiserver/config.go).
func (s *Signer) OpenIDConfiguration(jwksURI string) ([]byte, error) {
	var algs []string
	for _, k := range s.keys {
		algs = append(algs, k.alg)
	}
	slices.Sort(algs)
	return json.Marshal(map[string]any{
		"issuer":                                s.issuers[0],
		"jwks_uri":                              jwksURI,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": slices.Compact(algs),
	})
}

// coordinateSize is the bytes of one coordinate (and of r or s) on the curve: the
// fixed width JWS signatures and JWKs write them in (RFC 7518 §3.4, §6.2.1).
func coordinateSize(curve elliptic.Curve) int { return (curve.Params().BitSize + 7) / 8 }
