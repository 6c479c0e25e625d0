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

// dueAt is when the token is to be replaced: at 80% of its lifetime, or at 24 hours.
func (t cachedToken) dueAt() time.Time {
	ttl := t.expires.Sub(t.issued)
	return minTime(t.issued.Add(ttl*8/10), t.issued.Add(maxTokenAge))
}

func (t cachedToken) due(now time.Time) bool { return !now.Before(t.dueAt()) }

// nextRefresh is the earliest dueAt of the pod's tokens; ok is false if it has none.
func (c *tokenCache) nextRefresh(uid types.UID) (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, t := range c.m {
		if k.pod == uid {
			at, ok = earliest(at, ok, t.dueAt()), true
		}
	}
	return at, ok
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// earliest is t, or the earlier of at and t when have says at is set.
func earliest(at time.Time, have bool, t time.Time) time.Time {
	if !have {
		return t
	}
	return minTime(at, t)
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
