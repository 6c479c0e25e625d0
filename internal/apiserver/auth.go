package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
)

// authenticate accepts a client certificate signed by the cluster CA: the common name
// is the user and the organizations are the groups. The TLS handshake verified the
// chain against the cluster CA (tls.VerifyClientCertIfGiven with ClientCAs), once per
// connection; verifying again per request would cost an ECDSA check each time.
// Without a certificate, a bearer service account token is tried.
func (s *Server) authenticate(r *http.Request) (*registry.User, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		if token, ok := bearerToken(r); ok {
			return s.authenticateToken(r.Context(), token)
		}
		return nil, false
	}
	leaf := r.TLS.VerifiedChains[0][0]
	groups := append([]string{}, leaf.Subject.Organization...)
	groups = append(groups, "system:authenticated")
	return &registry.User{Name: leaf.Subject.CommonName, Groups: groups}, true
}

// bearerToken is the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func unauthorized() error { return apierrors.NewUnauthorized("Unauthorized") }

// Attributes describe a request for authorization, as upstream's authorizers see it.
type Attributes struct {
	User        registry.User
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
}

// Authorizer decides whether a request may proceed; the reason is shown to a refused
// client. RBAC will be one; until then every authenticated user may do everything.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string)
}

// authorize applies the configured authorizer to a resource request.
func (s *Server) authorize(ctx context.Context, user registry.User, info *requestInfo) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	a := Attributes{User: user, Verb: info.Verb, Group: info.Group, Resource: info.Resource,
		Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name}
	if ok, reason := s.cfg.Authorizer.Authorize(ctx, a); !ok {
		resource := info.Resource
		if info.Subresource != "" {
			resource += "/" + info.Subresource
		}
		msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q", user.Name, info.Verb, resource, info.Group)
		if info.Namespace != "" {
			msg += fmt.Sprintf(" in the namespace %q", info.Namespace)
		} else {
			msg += " at the cluster scope"
		}
		if reason != "" {
			msg += ": " + reason
		}
		return apierrors.NewForbidden(schema.GroupResource{Group: info.Group, Resource: resource}, info.Name, fmt.Errorf("%s", msg))
	}
	return nil
}
