package registry

import "context"

// User is the authenticated identity behind a request, for the few strategies that
// record who asked (a CertificateSigningRequest's requestor).
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

type userKey struct{}

// WithUser returns a context carrying the request's user; the apiserver sets it.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the request's user, if the context has one.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}
