// Package authn is the first step of the apiserver's request chain: it finds out who
// sent a request (a client certificate, a bearer token such as a ServiceAccount JWT,
// or nobody) and then applies impersonation, and puts the resulting user into the
// request's context (registry.WithUser) for the steps after it. Each way of
// authenticating is an Authenticator; Union tries them in order, so a new one plugs in
// with one line where the server builds its union.
package authn

import (
	"context"
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"mizzen/internal/registry"
)

// Authenticator says who a request's credentials name. ok is false when the request
// carries no credentials this authenticator accepts: err then says why credentials it
// understands were refused, and is nil when it found none of its kind.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (user registry.User, ok bool, err error)
}

// TokenAuthenticator says who a bearer token names, with AuthenticateRequest's
// meaning of ok and err.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (user registry.User, ok bool, err error)
}

// Union tries each authenticator in order and takes the first user one accepts; when
// none does, the errors of those that refused credentials are joined.
type Union []Authenticator

// AuthenticateRequest implements Authenticator.
func (u Union) AuthenticateRequest(r *http.Request) (registry.User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.AuthenticateRequest(r)
		if ok {
			return user, true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return registry.User{}, false, errors.Join(errs...)
}

// TokenUnion tries each token authenticator in order, as Union does.
type TokenUnion []TokenAuthenticator

// AuthenticateToken implements TokenAuthenticator.
func (u TokenUnion) AuthenticateToken(ctx context.Context, token string) (registry.User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.AuthenticateToken(ctx, token)
		if ok {
			return user, true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return registry.User{}, false, errors.Join(errs...)
}

// BearerToken authenticates the token of an "Authorization: Bearer" header with
// tokens; a request without one is not its kind.
func BearerToken(tokens TokenAuthenticator) Authenticator { return bearerToken{tokens} }

type bearerToken struct{ tokens TokenAuthenticator }

func (b bearerToken) AuthenticateRequest(r *http.Request) (registry.User, bool, error) {
	token, ok := BearerTokenOf(r)
	if !ok {
		return registry.User{}, false, nil
	}
	return b.tokens.AuthenticateToken(r.Context(), token)
}

// BearerTokenOf is the token of an "Authorization: Bearer" header.
func BearerTokenOf(r *http.Request) (string, bool) {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// The user a request without credentials is, where anonymous requests are allowed.
const (
	AnonymousUser        = "system:anonymous"
	UnauthenticatedGroup = "system:unauthenticated"
	AuthenticatedGroup   = "system:authenticated"
)

// Unauthorized is the error of a request whose credentials were refused, as upstream
// answers it: 401 with the message "Unauthorized".
func Unauthorized() error { return apierrors.NewUnauthorized("Unauthorized") }

// ErrorWriter answers a request with an error, as the server answers any.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// WithAuthentication authenticates each request with a and passes it on with the user
// in its context. A request no authenticator accepts is answered 401, except on a path
// public says anonymous users may reach, where a request with no credentials at all
// goes on as system:anonymous (refused credentials are 401 there too). As upstream,
// the credentials stop here: the Authorization header is removed, so proxied requests
// never carry the user's token on to a pod, a service or a kubelet.
func WithAuthentication(next http.Handler, a Authenticator, public func(path string) bool, fail ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok, _ := a.AuthenticateRequest(r)
		if !ok {
			if !public(r.URL.Path) || hasCredentials(r) {
				fail(w, r, Unauthorized())
				return
			}
			user = registry.User{Name: AnonymousUser, Groups: []string{UnauthenticatedGroup}}
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(registry.WithUser(r.Context(), user)))
	})
}

// hasCredentials reports whether a request presented any: a refused one is 401 even
// on a public path.
func hasCredentials(r *http.Request) bool {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		return true
	}
	return r.Header.Get("Authorization") != ""
}
