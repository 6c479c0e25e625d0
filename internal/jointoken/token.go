// Package jointoken is the token a machine presents to join a cluster, as a
// server or as an agent: "K10<ca-hash>::<id>.<secret>".
//
// The credential half, <id>.<secret>, is an upstream bootstrap token: a Secret
// "bootstrap-token-<id>" of type bootstrap.kubernetes.io/token in kube-system, which
// the apiserver authenticates as "system:bootstrap:<id>" in the group
// "system:bootstrappers" plus the token's extra groups. The role of the token (agent
// or server) is one of those extra groups.
//
// The <ca-hash> half is kubeadm's discovery hash in k3s's "K10" wrapping: the
// SHA-256 of the cluster CA certificate's Subject Public Key Info, in hex. A joining
// machine fetches the CA without trusting the server (the public kube-public/
// cluster-info ConfigMap), checks it against the hash and only then talks to the
// server with it; a token for another cluster, or a server impersonating this one,
// fails that check before any credential is sent.
package jointoken

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Prefix opens every token, as k3s's do: it names the format's version.
const Prefix = "K10"

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9]{6}$`)
	secretPattern = regexp.MustCompile(`^[a-z0-9]{16}$`)
	hashPattern   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Token is a parsed join token.
type Token struct {
	// CAHash is the hex SHA-256 of the cluster CA's Subject Public Key Info.
	CAHash string
	// ID names the bootstrap token (its Secret is bootstrap-token-ID); it is public.
	ID string
	// Secret is the token's secret half.
	Secret string
}

// String is the token as a user passes it to --token.
func (t Token) String() string { return Prefix + t.CAHash + "::" + t.Bearer() }

// Bearer is the credential the apiserver authenticates: upstream's bootstrap token.
func (t Token) Bearer() string { return t.ID + "." + t.Secret }

// Parse reads a token given to --token. It refuses a token without the CA hash:
// a machine that cannot verify the server it joins must not send it credentials.
func Parse(s string) (Token, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return Token{}, errors.New(`invalid token: it must look like "K10<ca-hash>::<id>.<secret>" (mizzen token create prints one)`)
	}
	hash, cred, ok := strings.Cut(rest, "::")
	if !ok {
		return Token{}, errors.New(`invalid token: missing "::" between the CA hash and the credentials`)
	}
	if !hashPattern.MatchString(hash) {
		return Token{}, errors.New("invalid token: the CA hash must be 64 lowercase hex digits (a SHA-256)")
	}
	id, secret, ok := strings.Cut(cred, ".")
	if !ok || !idPattern.MatchString(id) || !secretPattern.MatchString(secret) {
		return Token{}, errors.New(`invalid token: the credentials must be "<id>.<secret>" with a 6-character id and a 16-character secret of [a-z0-9]`)
	}
	return Token{CAHash: hash, ID: id, Secret: secret}, nil
}

// ParseBearer reads the credential half alone, "<id>.<secret>", as the apiserver
// receives it in an Authorization header; ok is false for anything else.
func ParseBearer(s string) (id, secret string, ok bool) {
	id, secret, ok = strings.Cut(s, ".")
	return id, secret, ok && idPattern.MatchString(id) && secretPattern.MatchString(secret)
}

// Generate makes a new token for the cluster whose CA certificate (PEM) is caPEM.
func Generate(caPEM []byte) (Token, error) {
	hash, err := HashCA(caPEM)
	if err != nil {
		return Token{}, err
	}
	return Token{CAHash: hash, ID: randomString(6), Secret: randomString(16)}, nil
}

// HashCA is the hash a token carries for the CA certificate in caPEM (the first
// certificate of the bundle: the cluster CA).
func HashCA(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("the CA bundle holds no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("parsing the CA certificate: %w", err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:]), nil
}

// ErrCAMismatch is returned when a server's CA is not the one the token names.
var ErrCAMismatch = errors.New("the server's CA does not match the token's CA hash: the token is for another cluster, or the server is not who it claims to be")

// VerifyCA checks that caPEM is the CA the token names.
func (t Token) VerifyCA(caPEM []byte) error {
	hash, err := HashCA(caPEM)
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(hash), []byte(t.CAHash)) != 1 {
		return ErrCAMismatch
	}
	return nil
}

// randomString draws n characters of [a-z0-9] from crypto/rand.
func randomString(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, n)
	for i := range out {
		// rand.Text-like uniformity: reject bytes past the largest multiple of 36.
		var b [1]byte
		for {
			_, _ = rand.Read(b[:])
			if b[0] < 252 {
				break
			}
		}
		out[i] = alphabet[int(b[0])%len(alphabet)]
	}
	return string(out)
}
