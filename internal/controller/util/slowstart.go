package util

import "sync"

// SlowStartInitialBatchSize is the size of the first batch of SlowStartBatch.
const SlowStartInitialBatchSize = 1

// SlowStartBatch calls fn count times in batches of 1, 2, 4, ... running each batch in
// parallel, and stops after the first batch with an error, so that a controller whose
// pods are all rejected (quota, admission) sends one failing request, not hundreds. It
// returns how many calls succeeded and the first error.
func SlowStartBatch(count int, fn func() error) (int, error) {
	succeeded := 0
	remaining := count
	for batch := min(remaining, SlowStartInitialBatchSize); batch > 0; batch = min(2*batch, remaining) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		for range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := fn()
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					succeeded++
				}
			}()
		}
		wg.Wait()
		remaining -= batch
		if firstErr != nil {
			return succeeded, firstErr
		}
	}
	return succeeded, nil
}
