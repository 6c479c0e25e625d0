package util

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowStartBatchRunsEachBatchTogether: the calls of a batch are in flight at once,
// and the next batch waits for them: with 7 calls (batches 1, 2, 4), at most 4 at once.
func TestSlowStartBatchRunsEachBatchTogether(t *testing.T) {
	var inFlight, most atomic.Int32
	var mu sync.Mutex
	release := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Let the calls in flight pile up, then release them together.
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			mu.Lock()
			close(release)
			release = make(chan struct{})
			mu.Unlock()
		}
	}()
	ok, err := SlowStartBatch(7, func() error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		ch := release
		mu.Unlock()
		<-ch
		return nil
	})
	if ok != 7 || err != nil {
		t.Fatalf("ok=%d err=%v", ok, err)
	}
	if most.Load() != 4 {
		t.Errorf("at most %d calls were in flight at once, want 4 (the third batch)", most.Load())
	}
}

// TestWarmGoroutinesAreReused: a function handed over while a kept goroutine is idle
// runs on that goroutine, and the goroutine exits once idle for its timeout.
func TestWarmGoroutinesAreReused(t *testing.T) {
	w := newWarmGoroutines(200 * time.Millisecond)
	ids := make(chan string, 2)
	w.do(func() { ids <- goroutineID() })
	first := <-ids
	// Wait until the goroutine is back in its select, ready for another function.
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case w.calls <- func() { ids <- goroutineID() }:
		default:
			if time.Now().After(deadline) {
				t.Fatal("the kept goroutine never became idle")
			}
			time.Sleep(time.Millisecond)
			continue
		}
		break
	}
	if second := <-ids; second != first {
		t.Errorf("second function ran on goroutine %s, want the kept %s", second, first)
	}
	time.Sleep(600 * time.Millisecond)
	select {
	case w.calls <- func() {}:
		t.Error("a goroutine was still waiting after its idle timeout")
	default:
	}
}

func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	// "goroutine 123 [running]:..."
	f := bytes.Fields(buf)
	return string(f[1])
}
