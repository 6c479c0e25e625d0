// Package fakeclock is a clock a test moves by hand, for code that takes its time
// from a func() time.Time.
package fakeclock

import (
	"sync"
	"time"
)

// Clock starts at its zero time, or at T if set before use, and moves only by Step.
type Clock struct {
	mu sync.Mutex
	T  time.Time
}

// Now is the clock's time; pass c.Now where the code under test takes a clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.T
}

// Step moves the clock by d.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.T = c.T.Add(d)
}
