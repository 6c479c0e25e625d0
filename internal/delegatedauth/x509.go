package delegatedauth

import (
	"crypto/x509"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// RequestHeaderConfig is how requests the apiserver forwards are recognised, as
// upstream's --requestheader-* flags: the client certificate must chain to CAs (the
// front-proxy CA) and, when AllowedNames is not empty, carry one of those common
// names; the user is then read from the headers.
type RequestHeaderConfig struct {
	CAs             *x509.CertPool
	AllowedNames    []string
	UsernameHeaders []string
	GroupHeaders    []string
	ExtraPrefixes   []string
}

// CertAuthenticator identifies callers by their client certificate: the apiserver's
// forwarded requests through the request headers, anyone else by a client certificate
// of ClientCAs (its common name the user, its organizations the groups).
type CertAuthenticator struct {
	ClientCAs     *x509.CertPool
	RequestHeader *RequestHeaderConfig
}

// User is an authenticated caller.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// errUntrustedCertificate is a client certificate of no CA this server trusts.
var errUntrustedCertificate = errors.New("client certificate signed by no trusted authority")

// Authenticate returns the caller, or false when the request carries no credentials
// this server accepts.
func (a *CertAuthenticator) Authenticate(r *http.Request) (*User, bool) {
	u, ok, _ := a.AuthenticateRequest(r)
	return u, ok
}

// AuthenticateRequest is Authenticate telling a request without a certificate (false,
// no error) from one whose certificate is refused (an error, which upstream answers
// 401 rather than treating the caller as anonymous).
func (a *CertAuthenticator) AuthenticateRequest(r *http.Request) (*User, bool, error) {
	if a == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	if rh := a.RequestHeader; rh != nil && rh.CAs != nil && verifies(leaf, r.TLS.PeerCertificates[1:], rh.CAs) {
		if len(rh.AllowedNames) > 0 && !slices.Contains(rh.AllowedNames, leaf.Subject.CommonName) {
			return nil, false, errors.New("request header client certificate of a name not allowed: " + leaf.Subject.CommonName)
		}
		u, ok := rh.user(r.Header)
		return u, ok, nil
	}
	if a.ClientCAs != nil && verifies(leaf, r.TLS.PeerCertificates[1:], a.ClientCAs) {
		return &User{Name: leaf.Subject.CommonName, Groups: append(slices.Clone(leaf.Subject.Organization), "system:authenticated")}, true, nil
	}
	if a.ClientCAs == nil && (a.RequestHeader == nil || a.RequestHeader.CAs == nil) {
		return nil, false, nil // no certificate authentication configured: the certificate is ignored
	}
	return nil, false, errUntrustedCertificate
}

// verifies reports whether leaf chains to roots as a client certificate.
func verifies(leaf *x509.Certificate, chain []*x509.Certificate, roots *x509.CertPool) bool {
	intermediates := x509.NewCertPool()
	for _, c := range chain {
		intermediates.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// user reads the forwarded user: the first username header set, every group header's
// values, and the extra headers (their key percent-decoded and lower-cased, as
// upstream encodes them).
func (rh *RequestHeaderConfig) user(h http.Header) (*User, bool) {
	u := &User{}
	for _, name := range rh.UsernameHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			u.Name = v
			break
		}
	}
	if u.Name == "" {
		return nil, false
	}
	for _, name := range rh.GroupHeaders {
		u.Groups = append(u.Groups, h.Values(name)...)
	}
	for key, values := range h {
		for _, prefix := range rh.ExtraPrefixes {
			if len(key) <= len(prefix) || !strings.EqualFold(key[:len(prefix)], prefix) {
				continue
			}
			extraKey, err := url.PathUnescape(key[len(prefix):])
			if err != nil {
				continue
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			extraKey = strings.ToLower(extraKey)
			u.Extra[extraKey] = append(u.Extra[extraKey], values...)
		}
	}
	return u, true
}
