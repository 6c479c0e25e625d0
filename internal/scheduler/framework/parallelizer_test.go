package framework

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParallelizerRunsEveryPieceOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 16} {
		for _, pieces := range []int{0, 1, 2, 3, 70, 71, 500, 5000} {
			counts := make([]atomic.Int32, pieces)
			parallelizer{workers: workers}.Until(context.Background(), pieces, func(i int) { counts[i].Add(1) })
			for i := range counts {
				if n := counts[i].Load(); n != 1 {
					t.Fatalf("workers %d, pieces %d: piece %d ran %d times", workers, pieces, i, n)
				}
			}
		}
	}
}

// TestParallelizerRunsAtMostItsWorkersAtOnce: never more pieces at once than the
// configured workers, nor than GOMAXPROCS (more cannot run together).
func TestParallelizerRunsAtMostItsWorkersAtOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, tc := range []struct{ workers, want int }{{1, 1}, {3, 3}, {16, 4}} {
		var running, most atomic.Int32
		parallelizer{workers: tc.workers}.Until(context.Background(), 400, func(int) {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(100 * time.Microsecond)
			running.Add(-1)
		})
		if m := int(most.Load()); m > tc.want {
			t.Errorf("workers %d with GOMAXPROCS 4: %d pieces ran at once, want at most %d", tc.workers, m, tc.want)
		}
	}
}

func TestParallelizerStopsStartingPiecesWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	ran := 0
	parallelizer{workers: 16}.Until(ctx, 10000, func(int) {
		mu.Lock()
		defer mu.Unlock()
		ran++
		if ran == 10 {
			cancel()
		}
	})
	// Each worker may finish the piece it started when the cancel came.
	if ran > 10+runtime.GOMAXPROCS(0) {
		t.Errorf("%d pieces ran, the cancel came at the 10th", ran)
	}
}
