package ticklimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeClock stands still unless a test moves it, and records what Wait slept.
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	cancel bool // sleeps end as if their context had been cancelled
}

func newFake(t *testing.T, qps float32, burst int) (*Limiter, *fakeClock) {
	t.Helper()
	// A start on a tick boundary, so that the expected waits are round numbers.
	c := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	l := New(qps, burst)
	l.now = func() time.Time { return c.now }
	l.sleep = func(ctx context.Context, d time.Duration) error {
		c.slept = append(c.slept, d)
		if c.cancel {
			return context.Canceled
		}
		return nil
	}
	return l, c
}

// TestHeldRequestsGoOnTheTick: at 1,000 qps with a burst of 2, the first two go at
// once, and the next ones, due a millisecond apart, wait for the tick after their
// token: the eighteen due in the first tick go at 20 ms, the next twenty at 40 ms.
func TestHeldRequestsGoOnTheTick(t *testing.T) {
	l, c := newFake(t, 1000, 2)
	for range 40 {
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.slept) != 38 {
		t.Fatalf("%d requests waited, want 38 (the burst of 2 goes at once)", len(c.slept))
	}
	for i, d := range c.slept {
		due := time.Duration(i+1) * time.Millisecond
		want := 20 * time.Millisecond
		if due > 20*time.Millisecond {
			want = 40 * time.Millisecond
		}
		if d != want {
			t.Errorf("request %d, its token due after %v, waited %v; want %v", i+3, due, d, want)
		}
	}
}

// TestNoRequestGoesBeforeItsToken: whatever the phase of the clock, a request never
// goes before client-go's own limiter would let it (the bucket's rate holds), and
// never later than a tick after.
func TestNoRequestGoesBeforeItsToken(t *testing.T) {
	for _, offset := range []time.Duration{0, time.Microsecond, 7 * time.Millisecond, 19*time.Millisecond + 999*time.Microsecond} {
		l, c := newFake(t, 300, 1)
		c.now = c.now.Add(offset)
		for range 30 {
			if err := l.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for i, d := range c.slept {
			due := time.Duration(float64(i+1) / 300 * float64(time.Second))
			if d < due-time.Microsecond || d >= due+Tick {
				t.Errorf("offset %v: request %d due after %v waited %v", offset, i+2, due, d)
			}
			if at := c.now.Add(d); at.UnixNano()%int64(Tick) != 0 {
				t.Errorf("offset %v: request %d released at %v, off the tick", offset, i+2, at)
			}
		}
	}
}

// TestWaitPastTheDeadlineGivesTheTokenBack: a request whose context ends before its
// tick fails at once, as client-go's limiter does, and the next request gets the
// token it would have had.
func TestWaitPastTheDeadlineGivesTheTokenBack(t *testing.T) {
	// A token every tick, so that a token not given back shows as a tick more.
	l, c := newFake(t, float32(time.Second/Tick), 1)
	if err := l.Wait(context.Background()); err != nil { // the burst
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), c.now.Add(10*time.Millisecond))
	defer cancel()
	if err := l.Wait(ctx); err == nil {
		t.Fatal("a wait past its context's deadline succeeded")
	}
	if len(c.slept) != 0 {
		t.Fatalf("it slept %v before failing", c.slept)
	}
	c.cancel = true
	if err := l.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait returned %v", err)
	}
	c.cancel = false
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Both earlier tokens were given back: this one is due a tick on, not three.
	if got := c.slept[len(c.slept)-1]; got != Tick {
		t.Fatalf("the request after two given-back tokens waited %v, want %v", got, Tick)
	}
}

// TestTryAccept takes what the burst holds and no more.
func TestTryAccept(t *testing.T) {
	l, _ := newFake(t, 10, 3)
	for i := range 3 {
		if !l.TryAccept() {
			t.Fatalf("try %d refused within the burst", i)
		}
	}
	if l.TryAccept() {
		t.Fatal("a try beyond the burst was accepted")
	}
	if l.QPS() != 10 {
		t.Fatalf("QPS %v", l.QPS())
	}
}

// TestRealSleep waits on a real timer and ends with its context.
func TestRealSleep(t *testing.T) {
	if err := sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep with an ended context returned %v", err)
	}
}
