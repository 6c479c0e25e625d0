package util

import (
	"sync"
	"time"
)

// SlowStartInitialBatchSize is the size of the first batch of SlowStartBatch.
const SlowStartInitialBatchSize = 1

// SlowStartBatch calls fn count times in batches of 1, 2, 4, ... running each batch in
// parallel, and stops after the first batch with an error, so that a controller whose
// pods are all rejected (quota, admission) sends one failing request, not hundreds. It
// returns how many calls succeeded and the first error.
//
// One call of each batch runs on the caller's goroutine and the others on kept
// goroutines (warm), so that a create starts on a stack already grown by earlier ones.
func SlowStartBatch(count int, fn func() error) (int, error) {
	succeeded := 0
	remaining := count
	for batch := min(remaining, SlowStartInitialBatchSize); batch > 0; batch = min(2*batch, remaining) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		call := func() {
			err := fn()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				succeeded++
			}
		}
		wg.Add(batch - 1)
		for range batch - 1 {
			warm.do(func() {
				defer wg.Done()
				call()
			})
		}
		call()
		wg.Wait()
		remaining -= batch
		if firstErr != nil {
			return succeeded, firstErr
		}
	}
	return succeeded, nil
}

// warm is the goroutines SlowStartBatch's parallel calls run on.
var warm = newWarmGoroutines(30 * time.Second)

// warmGoroutines runs functions on goroutines kept for a while after their last one.
// A goroutine started per call begins on a small stack and copies it several times as
// it grows through client-go's request path (encoding, HTTP/2, TLS): ~2% of a busy
// controller-manager's CPU. A kept goroutine's stack has grown already.
type warmGoroutines struct {
	// calls hands a function to an idle goroutine; unbuffered, so a send succeeds
	// only when one is waiting.
	calls chan func()
	// idle is how long a goroutine waits for another function before it exits.
	idle time.Duration
}

func newWarmGoroutines(idle time.Duration) *warmGoroutines {
	return &warmGoroutines{calls: make(chan func()), idle: idle}
}

// do runs f on an idle kept goroutine, or on a new one when none is idle. It does not
// wait for f.
func (w *warmGoroutines) do(f func()) {
	select {
	case w.calls <- f:
	default:
		go w.serve(f)
	}
}

// serve runs f, then whatever do hands it, until it has been idle for w.idle.
func (w *warmGoroutines) serve(f func()) {
	idle := time.NewTimer(w.idle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(w.idle)
		select {
		case f = <-w.calls:
		case <-idle.C:
			return
		}
	}
}
