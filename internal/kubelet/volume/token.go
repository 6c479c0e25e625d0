package volume

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// maxTokenAge is when a token is renewed whatever its TTL, as upstream's kubelet does.
const maxTokenAge = 24 * time.Hour

type tokenKey struct {
	pod      types.UID
	audience string
	seconds  int64
}

type cachedToken struct {
	token   string
	issued  time.Time
	expires time.Time
}

// tokenCache keeps each pod's service account tokens until they are older than 80%
// of their lifetime or 24 hours.
type tokenCache struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	m     map[tokenKey]cachedToken
}

func newTokenCache(c clock.PassiveClock) *tokenCache {
	return &tokenCache{clock: c, m: map[tokenKey]cachedToken{}}
}

func (t cachedToken) due(now time.Time) bool {
	ttl := t.expires.Sub(t.issued)
	return !now.Before(t.issued.Add(ttl*8/10)) || now.Sub(t.issued) > maxTokenAge
}

func (c *tokenCache) get(ctx context.Context, pod *v1.Pod, audience string, seconds int64, src Sources) (string, error) {
	key := tokenKey{pod: pod.UID, audience: audience, seconds: seconds}
	now := c.clock.Now()
	c.mu.Lock()
	cur, ok := c.m[key]
	c.mu.Unlock()
	if ok && !cur.due(now) {
		return cur.token, nil
	}
	tok, expires, err := src.ServiceAccountToken(ctx, pod, audience, seconds)
	if err != nil {
		if ok && now.Before(cur.expires) {
			return cur.token, nil // keep serving the valid one; retried on the next sync
		}
		return "", err
	}
	c.mu.Lock()
	c.m[key] = cachedToken{token: tok, issued: now, expires: expires}
	c.mu.Unlock()
	return tok, nil
}

func (c *tokenCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.pod == uid {
			delete(c.m, k)
		}
	}
}
