package util

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// A failing key is retried until it succeeds; a key asking to be requeued comes back
// later without being counted as a failure.
func TestRunKeyWorkersRetriesAndRequeues(t *testing.T) {
	q := NewQueue("test")
	var mu sync.Mutex
	calls := map[string]int{}
	syncKey := func(ctx context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		switch {
		case key == "flaky" && calls[key] < 3:
			return errors.New("apiserver unavailable")
		case key == "waiting" && calls[key] < 2:
			return RequeueAfter(10*time.Millisecond, "content remains")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { RunKeyWorkers(ctx, "test", q, 2, syncKey); close(done) }()
	q.Add("flaky")
	q.Add("waiting")
	q.Add("fine")
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return calls["flaky"] == 3 && calls["waiting"] == 2 && calls["fine"] == 1, nil
	})
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("calls %v, want flaky 3, waiting 2, fine 1", calls)
	}
	if n := q.NumRequeues("waiting"); n != 0 {
		t.Errorf("a requeue-after counted as %d failures", n)
	}
	cancel()
	<-done
}
