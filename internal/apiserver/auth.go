package apiserver

import (
	"crypto/x509"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"mizzen/internal/registry"
)

// authenticate accepts a client certificate signed by the cluster CA: the common name
// is the user and the organizations are the groups. This is the place where token and
// other authenticators join the chain.
func (s *Server) authenticate(r *http.Request) (*registry.User, bool) {
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
	return &registry.User{Name: leaf.Subject.CommonName, Groups: groups}, true
}

func unauthorized() error { return apierrors.NewUnauthorized("Unauthorized") }
