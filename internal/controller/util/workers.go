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
