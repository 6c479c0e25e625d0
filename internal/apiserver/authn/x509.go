package authn

import (
	"net/http"

	"mizzen/internal/registry"
)

// ClientCert accepts a client certificate signed by the cluster CA: the common name is
// the user and the organizations are the groups. The TLS handshake verified the chain
// against the cluster CA (tls.VerifyClientCertIfGiven with the server's ClientCAs),
// once per connection; verifying again per request would cost an ECDSA check each time.
type ClientCert struct{}

// AuthenticateRequest implements Authenticator.
func (ClientCert) AuthenticateRequest(r *http.Request) (registry.User, bool, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return registry.User{}, false, nil
	}
	leaf := r.TLS.VerifiedChains[0][0]
	groups := append([]string{}, leaf.Subject.Organization...)
	groups = append(groups, AuthenticatedGroup)
	return registry.User{Name: leaf.Subject.CommonName, Groups: groups}, true, nil
}
