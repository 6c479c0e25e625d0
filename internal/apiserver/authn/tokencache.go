package authn

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"mizzen/internal/registry"
)

// TokenSuccessTTL is how long the apiserver remembers who a bearer token named, as
// upstream's kube-apiserver does (its TokenSuccessCacheTTL): a token's signature is
// checked once per ten seconds rather than on every request, and a token whose service
// account or pod was deleted is refused within that time. Refusals are not cached.
const TokenSuccessTTL = 10 * time.Second

// CachedTokens remembers tokens' successful authentications for a while.
type CachedTokens struct {
	tokens TokenAuthenticator
	ttl    time.Duration
	now    func() time.Time

	mu        sync.Mutex
	users     map[[sha256.Size]byte]cachedUser // by the token's hash: no token kept in memory
	nextSweep time.Time
}

type cachedUser struct {
	user    registry.User
	expires time.Time
}

// NewCachedTokens caches tokens' successes for ttl.
func NewCachedTokens(tokens TokenAuthenticator, ttl time.Duration) *CachedTokens {
	return &CachedTokens{tokens: tokens, ttl: ttl, now: time.Now, users: map[[sha256.Size]byte]cachedUser{}}
}

// AuthenticateToken implements TokenAuthenticator.
func (c *CachedTokens) AuthenticateToken(ctx context.Context, token string) (registry.User, bool, error) {
	key := sha256.Sum256([]byte(token))
	now := c.now()
	c.mu.Lock()
	cached, hit := c.users[key]
	c.mu.Unlock()
	if hit && now.Before(cached.expires) {
		return cached.user, true, nil
	}
	user, ok, err := c.tokens.AuthenticateToken(ctx, token)
	if !ok {
		return user, ok, err
	}
	// Clipped, so that whoever appends to a request's groups copies them.
	user.Groups = slices.Clip(user.Groups)
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.After(c.nextSweep) {
		for k, u := range c.users {
			if !now.Before(u.expires) {
				delete(c.users, k)
			}
		}
		c.nextSweep = now.Add(c.ttl)
	}
	c.users[key] = cachedUser{user: user, expires: now.Add(c.ttl)}
	return user, true, nil
}
