package apiserver

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authn"
	"mizzen/internal/registry"
)

// buildHandlerChain puts the request chain in front of the REST core, in upstream's
// order (DefaultBuildHandlerChain): authentication, then impersonation, then
// authorization and routing (serveAuthenticated).
func (s *Server) buildHandlerChain() http.Handler {
	var h http.Handler = http.HandlerFunc(s.serveAuthenticated)
	h = authn.WithImpersonation(h, s.authorizeResource, s.writeError)
	h = authn.WithAuthentication(h, s.authenticator(), isPublicPath, s.writeError)
	return h
}

// authenticator is every way a request can authenticate, tried in order: a client
// certificate first (a bearer token beside it is ignored), then a bearer token.
func (s *Server) authenticator() authn.Authenticator {
	return authn.Union{
		authn.ClientCert{},
		authn.BearerToken(authn.TokenUnion{
			s.saTokens,
		}),
	}
}

// reviewToken authenticates a bearer token for the given audiences, for TokenReview
// (see authn.ServiceAccountTokens.Review).
func (s *Server) reviewToken(ctx context.Context, token string, audiences []string) (*registry.User, []string, error) {
	return s.saTokens.Review(ctx, token, audiences)
}

// tokenObjects reads what ServiceAccount tokens are bound to from the watch cache.
type tokenObjects struct{ s *Server }

func (o tokenObjects) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error) {
	obj, err := o.s.cachedObject(ctx, gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	return accessor(obj), nil
}
