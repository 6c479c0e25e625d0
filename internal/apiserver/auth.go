package apiserver

import (
	"context"
	"crypto/x509"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// userInfo is who made a request.
type userInfo struct {
	Name   string
	Groups []string
}

type userKey struct{}

func withUser(ctx context.Context, u *userInfo) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// userFrom returns the request's authenticated user.
func userFrom(ctx context.Context) *userInfo {
	u, _ := ctx.Value(userKey{}).(*userInfo)
	return u
}

// authenticate accepts a client certificate signed by the cluster CA: the common name
// is the user and the organizations are the groups. This is the place where token and
// other authenticators join the chain.
func (s *Server) authenticate(r *http.Request) (*userInfo, bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || s.cfg.ClientCAs == nil {
		return nil, false
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         s.cfg.ClientCAs,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, false
	}
	groups := append([]string{}, leaf.Subject.Organization...)
	groups = append(groups, "system:authenticated")
	return &userInfo{Name: leaf.Subject.CommonName, Groups: groups}, true
}

func unauthorized() error { return apierrors.NewUnauthorized("Unauthorized") }
