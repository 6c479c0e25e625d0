package apiserver

import (
	"context"
	"net/http"
	"strings"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authn"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/apiserver/requestmetrics"
	"mizzen/internal/registry"
)

// buildHandlerChain puts the request chain in front of the REST core, in upstream's
// order (DefaultBuildHandlerChain): authentication, impersonation, what the path names
// (requestInfo), priority and fairness or, with it off, the max-inflight limits (inside
// the metrics, which count their waits and refusals as upstream's do), authorization,
// then routing (serveAuthorized).
// In front of them all, every response gets upstream's Cache-Control and Audit-ID
// headers (withCacheControl, withAuditID) and a browser's state change from another site's page is refused
// (ui.go: withBrowserOrigin). The chain after authentication is kept apart
// (s.authenticated) for the UI's in-process requests as its user.
func (s *Server) buildHandlerChain() http.Handler {
	var h http.Handler = http.HandlerFunc(s.serveAuthorized)
	h = authz.WithAuthorization(h, s.cfg.Authorizer, s.requestAttributes, s.writeError)
	if s.flowControl != nil {
		h = s.flowControl.Handler(h, s.describeForFlowControl, s.rejectForLoad)
	} else if s.inflight != nil {
		h = s.inflight.Handler(h, describeForMaxInflight, s.rejectForLoad)
	}
	h = s.metrics.Instrument(h, describeRequest)
	h = withRequestInfo(h)
	h = authn.WithImpersonation(h, s.authorizeResource, s.writeError)
	s.authenticated = h
	h = authn.WithAuthentication(h, s.authenticator(), s.anonymousAllowed, s.writeError)
	h = withBrowserOrigin(h, s.writeError)
	h = withAuditID(h)
	h = withCacheControl(h)
	return h
}

// withCacheControl marks every response private and not to be reused unchecked, as
// upstream's WithCacheControl does (every response depends on who asked); a handler
// may set its own (the OpenAPI documents, the OpenID discovery).
func withCacheControl(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.Header()["Cache-Control"]; !ok {
			w.Header().Set("Cache-Control", "no-cache, private")
		}
		next.ServeHTTP(w, r)
	})
}

// headerAuditID names a request in upstream's audit log and in its client's logs.
const headerAuditID = "Audit-ID"

// withAuditID answers every request with upstream's Audit-ID header: the one the
// request sent, or else a new UUID (as upstream's WithAuditInit, which runs whether
// or not audit logging is on). Clients show it with the response's other headers
// (kubectl -v=8).
func withAuditID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(headerAuditID)
		if id == "" {
			id = uuid.NewString()
		}
		if w.Header().Get(headerAuditID) == "" {
			w.Header().Set(headerAuditID, id)
		}
		next.ServeHTTP(w, r)
	})
}

// authenticator is every way a request can authenticate, tried in order: a client
// certificate first (a bearer token beside it is ignored), then a bearer token, then
// a WebSocket's token subprotocol (a browser's exec). A token accepted is remembered
// for TokenSuccessTTL, as upstream does.
func (s *Server) authenticator() authn.Authenticator {
	tokens := authn.NewCachedTokens(authn.TokenUnion{
		bootstrapTokenAuthenticator{s},
		s.saTokens,
	}, authn.TokenSuccessTTL)
	return authn.Union{
		authn.ClientCert{},
		authn.BearerToken(tokens),
		authn.WebSocketBearerToken(tokens),
	}
}

type requestInfoKey struct{}

// withRequestInfo parses what a request's path names once, for authorization and
// routing; health and version paths are never resource requests.
func withRequestInfo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isPublicPath(r.URL.Path) {
			if info := parseRequestInfo(r); info != nil {
				r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// describeRequest is what /metrics records of a resource request (nil for others).
func describeRequest(r *http.Request) *requestmetrics.Request {
	info := requestInfoFrom(r.Context())
	if info == nil || info.Resource == "" {
		return nil
	}
	return &requestmetrics.Request{Verb: info.Verb, Group: info.Group, Version: info.Version,
		Resource: info.Resource, Subresource: info.Subresource, Name: info.Name, Namespace: info.Namespace,
		Apply:  r.Method == http.MethodPatch && strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch"),
		DryRun: r.URL.Query().Get("dryRun") != ""}
}

// requestInfoFrom is what withRequestInfo parsed, nil for a request that names no
// resource path.
func requestInfoFrom(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// reviewToken authenticates a bearer token for the given audiences, for TokenReview
// (see authn.ServiceAccountTokens.Review).
func (s *Server) reviewToken(ctx context.Context, token string, audiences []string) (*registry.User, []string, error) {
	if user, granted, ok, err := s.reviewBootstrapToken(ctx, token, audiences); ok {
		return user, granted, err
	}
	return s.saTokens.Review(ctx, token, audiences)
}

// anonymousAllowed tells whether a request without credentials to path goes on as
// system:anonymous, for the authorizer to judge (--anonymous-auth, as upstream); with
// anonymous requests off, only health and version are.
func (s *Server) anonymousAllowed(path string) bool {
	return s.cfg.AnonymousAuth || isPublicPath(path)
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
