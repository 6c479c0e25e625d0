package flowcontrol

import (
	"sync"
	"time"
)

// maxRetryAfterSeconds is the most a refusal asks a client to wait, as upstream's.
const maxRetryAfterSeconds = 32

// retryAfter is the Retry-After a level's refusals carry, as upstream's kube-apiserver
// works it out (its dropped-requests tracker, in the manner of TCP's congestion
// window): one second at first; doubled, up to maxRetryAfterSeconds, when over the
// last that-many seconds the level refused at least three requests per second of it
// (and it was not raised within that time); one second less when it refused fewer than
// one per second. It changes only on a new second's first refusal, from the whole
// seconds before it, so that all refusals of one second ask for the same wait.
type retryAfter struct {
	mu       sync.Mutex
	seconds  int64
	raisedAt int64 // the Unix second of the last doubling
	// current counts the refusals of the second under way; past, those of the seconds
	// before it that may still count, oldest first.
	current refusalCount
	past    []refusalCount
}

type refusalCount struct{ unix, n int64 }

// refused records a refusal at now and returns the seconds it asks the client to wait.
func (t *retryAfter) refused(now time.Time) int {
	sec := now.Unix()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seconds == 0 {
		t.seconds = 1
	}
	if sec == t.current.unix {
		t.current.n++
		return int(t.seconds)
	}
	if t.current.n > 0 {
		t.past = append(t.past, t.current)
	}
	t.current = refusalCount{unix: sec, n: 1}
	// What is older than twice the wait (or the longest wait) can no longer count.
	keep := min(2*t.seconds, maxRetryAfterSeconds)
	old := 0
	for old < len(t.past) && sec-t.past[old].unix > keep {
		old++
	}
	t.past = t.past[old:]
	var refusals int64
	for _, c := range t.past {
		if sec-c.unix <= t.seconds {
			refusals += c.n
		}
	}
	switch {
	case sec-t.raisedAt >= t.seconds && refusals >= 3*t.seconds:
		t.seconds = min(2*t.seconds, maxRetryAfterSeconds)
		t.raisedAt = sec
	case refusals < t.seconds && t.seconds > 1:
		t.seconds--
	}
	return int(t.seconds)
}
