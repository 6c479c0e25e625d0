// Package bootstraptoken authenticates upstream's bootstrap tokens: a bearer token
// "<id>.<secret>" whose Secret kube-system/bootstrap-token-<id> (type
// bootstrap.kubernetes.io/token) names the same secret, allows
// usage-bootstrap-authentication and has not expired. The user is
// "system:bootstrap:<id>" in the group "system:bootstrappers" plus the Secret's
// auth-extra-groups, as upstream's apiserver with --enable-bootstrap-token-auth.
//
// Secrets come from a Getter backed by a cache (the apiserver's watch cache), so a
// request never costs an etcd read.
package bootstraptoken

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"mizzen/internal/jointoken"
	"mizzen/internal/registry"
)

// Getter reads a Secret from a cache; it returns an error when there is none.
type Getter func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// Authenticator checks bootstrap tokens against their Secrets.
type Authenticator struct {
	get Getter
	now func() time.Time
}

// New is an authenticator reading Secrets through get.
func New(get Getter) *Authenticator { return &Authenticator{get: get, now: time.Now} }

// WithClock makes the authenticator read the time from now (tests).
func (a *Authenticator) WithClock(now func() time.Time) *Authenticator {
	a.now = now
	return a
}

// Handles tells whether token has a bootstrap token's shape, so that the server
// asks this authenticator rather than another one about it.
func Handles(token string) bool {
	_, _, ok := jointoken.ParseBearer(token)
	return ok
}

// ErrInvalid is every refusal's error as a client sees it: upstream logs the reason
// and answers 401 without telling which check failed.
var ErrInvalid = errors.New("invalid bootstrap token")

// extraGroupPattern is what an auth-extra-groups entry must look like, as upstream.
var extraGroupPattern = regexp.MustCompile(`^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$`)

// Authenticate returns the token's user, or why it is refused: the first error is
// ErrInvalid wrapped around the reason, for the server's log.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (*registry.User, error) {
	id, secret, ok := jointoken.ParseBearer(token)
	if !ok {
		return nil, fmt.Errorf("%w: not of the form <id>.<secret>", ErrInvalid)
	}
	name := jointoken.SecretPrefix + id
	s, err := a.get(ctx, jointoken.Namespace, name)
	if err != nil || s == nil {
		return nil, fmt.Errorf("%w: no secret %s/%s", ErrInvalid, jointoken.Namespace, name)
	}
	if s.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%w: secret %s is being deleted", ErrInvalid, name)
	}
	info, want, err := jointoken.Read(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(secret)) != 1 {
		return nil, fmt.Errorf("%w: the secret of token %s does not match", ErrInvalid, id)
	}
	if info.Expired(a.now()) {
		return nil, fmt.Errorf("%w: token %s expired at %s", ErrInvalid, id, info.Expires.Format(time.RFC3339))
	}
	if !slices.Contains(info.Usages, jointoken.UsageAuthentication) {
		return nil, fmt.Errorf("%w: token %s is not marked usage-bootstrap-%s", ErrInvalid, id, jointoken.UsageAuthentication)
	}
	groups := []string{jointoken.BootstrapGroup}
	for _, g := range info.Groups {
		if !extraGroupPattern.MatchString(g) {
			return nil, fmt.Errorf("%w: token %s: extra group %q does not begin with %s:", ErrInvalid, id, g, jointoken.BootstrapGroup)
		}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	groups = append(groups, "system:authenticated")
	return &registry.User{Name: jointoken.BootstrapUserPrefix + id, Groups: groups}, nil
}
