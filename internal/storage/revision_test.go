package storage_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"mizzen/internal/storage"
)

// TestCurrentRevisionSeesEveryEarlierWrite: concurrent callers share reads of etcd's
// revision, yet each gets a revision at least as new as every write finished before
// it asked (a shared read never started before a caller arrived), and a caller whose
// context has ended stops waiting.
func TestCurrentRevisionSeesEveryEarlierWrite(t *testing.T) {
	ctx, member := startMember(t)
	client := member.Client()
	store := storage.NewStore(client)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				resp, err := client.Put(ctx, fmt.Sprintf("/registry/test/%d-%d", w, i), "x")
				if err != nil {
					errs <- err
					return
				}
				rev, err := store.CurrentRevision(ctx)
				if err != nil {
					errs <- err
					return
				}
				if rev < resp.Header.Revision {
					errs <- fmt.Errorf("revision %d after a write at %d", rev, resp.Header.Revision)
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ended, stop := context.WithCancel(ctx)
	stop()
	if _, err := store.CurrentRevision(ended); !errors.Is(err, context.Canceled) {
		t.Errorf("with an ended context: %v, want context.Canceled", err)
	}
}
