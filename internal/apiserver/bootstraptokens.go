package apiserver

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"mizzen/internal/apiserver/authn/bootstraptoken"
	"mizzen/internal/registry"
)

// newBootstrapTokens is the bootstrap token authenticator reading Secrets from the
// watch cache, or nil when Config.BootstrapTokenAuth is off.
func (s *Server) newBootstrapTokens() *bootstraptoken.Authenticator {
	if !s.cfg.BootstrapTokenAuth {
		return nil
	}
	return bootstraptoken.New(func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
		obj, err := s.cachedObject(ctx, secretsGVR, namespace, name)
		if err != nil {
			return nil, err
		}
		secret, _ := obj.(*corev1.Secret)
		return secret, nil
	})
}

// reviewBootstrapToken authenticates a bootstrap token; handled is false for a token
// of another shape. Bootstrap tokens name no audience: they are good for this
// server's own audiences only, as upstream's audience-agnostic authenticators.
func (s *Server) reviewBootstrapToken(ctx context.Context, token string, audiences []string) (user *registry.User, granted []string, handled bool, err error) {
	if s.bootstrapTokens == nil || !bootstraptoken.Handles(token) {
		return nil, nil, false, nil
	}
	for _, a := range audiences {
		if slices.Contains(s.audiences(), a) {
			granted = append(granted, a)
		}
	}
	if len(granted) == 0 {
		return nil, nil, true, errBootstrapTokenNotForAudience
	}
	user, err = s.bootstrapTokens.Authenticate(ctx, token)
	if err != nil {
		s.log.Debug("bootstrap token refused", "reason", err)
		return nil, nil, true, bootstraptoken.ErrInvalid
	}
	return user, granted, true, nil
}

// errBootstrapTokenNotForAudience refuses a bootstrap token asked for an audience
// other than this server's, in TokenReview's words for an invalid token.
var errBootstrapTokenNotForAudience = errors.New("invalid bearer token")

// bootstrapTokenAuthenticator puts bootstrap tokens in the request chain's bearer
// token authenticators; a token of another shape is left to the others.
type bootstrapTokenAuthenticator struct{ s *Server }

func (b bootstrapTokenAuthenticator) AuthenticateToken(ctx context.Context, token string) (registry.User, bool, error) {
	user, _, handled, err := b.s.reviewBootstrapToken(ctx, token, b.s.audiences())
	if !handled || err != nil {
		return registry.User{}, false, err
	}
	return *user, true, nil
}
