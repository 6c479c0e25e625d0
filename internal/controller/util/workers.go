package util

import (
	"context"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// SyncFunc reconciles the object named by key from observed state.
type SyncFunc func(ctx context.Context, key string) error

// RunWorkers is RunKeyWorkers in the background: it returns at once.
func RunWorkers(ctx context.Context, name string, q workqueue.TypedRateLimitingInterface[string], workers int, syncFn SyncFunc, synced ...cache.InformerSynced) {
	go RunKeyWorkers(ctx, name, q, workers, syncFn, synced...)
}

// NewQueue returns the queue of object keys every controller uses: keys deduplicated
// while waiting, failures retried with per-key exponential back-off under an overall
// rate limit. name labels its work queue metrics; controllers use upstream's queue
// names ("endpoint", "garbage_collector_attempt_to_delete", ...) so dashboards match.
func NewQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}

// Enqueue adds obj's namespace/name key (tombstones included) to q.
func Enqueue(q workqueue.TypedInterface[string], obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	q.Add(key)
}
