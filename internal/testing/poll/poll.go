// Package poll waits, in tests, for a condition to hold.
package poll

import (
	"testing"
	"time"
)

// Until calls cond every interval until it holds, and fails the test (naming what it
// waited for) if it still does not after timeout.
func Until(t testing.TB, what string, timeout, interval time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(interval)
	}
}
