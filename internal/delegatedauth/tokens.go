package delegatedauth

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// DefaultTokenCacheTTL is how long a TokenReview's answer is reused, as upstream's
// --authentication-token-webhook-cache-ttl for delegated authentication (10s), for
// accepted and refused tokens alike.
const DefaultTokenCacheTTL = 10 * time.Second

// TokenReviewer authenticates bearer tokens by a TokenReview, caching the answers.
type TokenReviewer struct {
	client authenticationclient.TokenReviewInterface
	ttl    time.Duration
	cache  *ttlCache[[sha256.Size]byte, tokenResult]
}

type tokenResult struct {
	user *User
	ok   bool
}

// NewTokenReviewer reviews tokens through client, reusing an answer for ttl
// (DefaultTokenCacheTTL when zero).
func NewTokenReviewer(client authenticationclient.TokenReviewInterface, ttl time.Duration) *TokenReviewer {
	if ttl <= 0 {
		ttl = DefaultTokenCacheTTL
	}
	return &TokenReviewer{client: client, ttl: ttl, cache: newTTLCache[[sha256.Size]byte, tokenResult]()}
}

// AuthenticateToken returns the token's user, false when the apiserver does not
// accept it, or the error of a review that could not be made (not cached).
func (t *TokenReviewer) AuthenticateToken(ctx context.Context, token string) (*User, bool, error) {
	key := sha256.Sum256([]byte(token))
	if r, ok := t.cache.get(key); ok {
		return r.user, r.ok, nil
	}
	review, err := t.client.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, err
	}
	r := tokenResult{}
	if st := review.Status; st.Authenticated {
		r = tokenResult{ok: true, user: &User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups}}
		if len(st.User.Extra) > 0 {
			r.user.Extra = map[string][]string{}
			for k, v := range st.User.Extra {
				r.user.Extra[k] = []string(v)
			}
		}
	}
	t.cache.put(key, r, t.ttl)
	return r.user, r.ok, nil
}

// ttlCache is a map whose entries expire; expired entries are dropped when the map
// is swept, at most once per insert past maxEntries.
type ttlCache[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

// maxEntries is the size past which an insert sweeps the expired entries out.
const maxEntries = 4096

func newTTLCache[K comparable, V any]() *ttlCache[K, V] {
	return &ttlCache[K, V]{entries: map[K]ttlEntry[V]{}}
}

func (c *ttlCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || time.Now().After(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

func (c *ttlCache[K, V]) put(k K, v V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.entries) >= maxEntries {
		for key, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, key)
			}
		}
	}
	if len(c.entries) >= maxEntries {
		clear(c.entries) // all live: a flood of distinct credentials; start over
	}
	c.entries[k] = ttlEntry[V]{value: v, expires: now.Add(ttl)}
}
