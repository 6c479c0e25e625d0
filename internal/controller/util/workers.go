package util

import (
	"context"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// NewQueue returns the rate-limited queue of object keys every controller uses.
func NewQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// SyncFunc reconciles the object named by key from observed state.
type SyncFunc func(ctx context.Context, key string) error

// Enqueue adds the namespace/name key of obj (or of a deleted-object tombstone) to q.
func Enqueue(q workqueue.TypedRateLimitingInterface[string], obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		slog.Warn("cannot compute object key", "err", err)
		return
	}
	q.Add(key)
}

// RunWorkers waits for the informers in synced, then runs workers goroutines that pull
// keys from q and call sync until ctx ends. It does not block; the queue is shut down
// when ctx ends.
func RunWorkers(ctx context.Context, name string, q workqueue.TypedRateLimitingInterface[string], workers int, syncFn SyncFunc, synced ...cache.InformerSynced) {
	if workers < 1 {
		workers = 1
	}
	log := slog.With("controller", name)
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	go func() {
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		log.Info("caches synced, starting workers", "workers", workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wait.UntilWithContext(ctx, func(ctx context.Context) {
					for processNext(ctx, log, q, syncFn) {
					}
				}, 0)
			}()
		}
		wg.Wait()
	}()
}

func processNext(ctx context.Context, log *slog.Logger, q workqueue.TypedRateLimitingInterface[string], sync SyncFunc) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	if err := sync(ctx, key); err != nil {
		level := slog.LevelInfo
		if apierrors.IsConflict(err) {
			// A write raced a newer version than the cache held: routine, retried.
			level = slog.LevelDebug
		}
		log.Log(ctx, level, "sync failed, will retry", "key", key, "err", err)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}
