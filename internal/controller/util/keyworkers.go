package util

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// EnqueueKeyHandler enqueues the key of every added, updated or deleted object.
func EnqueueKeyHandler(q workqueue.TypedRateLimitingInterface[string]) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { Enqueue(q, obj) },
		UpdateFunc: func(_, obj any) { Enqueue(q, obj) },
		DeleteFunc: func(obj any) { Enqueue(q, obj) },
	}
}

// RunKeyWorkers waits for the informers to sync, then runs workers goroutines that
// hand each queued key to sync until ctx ends; a failed key is retried with backoff.
// It blocks, and shuts the queue down on return.
func RunKeyWorkers(ctx context.Context, name string, q workqueue.TypedRateLimitingInterface[string],
	workers int, syncKey func(ctx context.Context, key string) error, synced ...cache.InformerSynced) {
	defer q.ShutDown()
	log := slog.With("controller", name)
	if !cache.WaitForNamedCacheSync(name, ctx.Done(), synced...) {
		return
	}
	if workers < 1 {
		workers = 1
	}
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for processNextKey(ctx, log, q, syncKey) {
			}
		})
	}
	wg.Wait()
}

func processNextKey(ctx context.Context, log *slog.Logger, q workqueue.TypedRateLimitingInterface[string],
	syncKey func(ctx context.Context, key string) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := syncKey(ctx, key)
	var later *RequeueAfterError
	if errors.As(err, &later) {
		q.Forget(key)
		q.AddAfter(key, later.After)
		return true
	}
	if err != nil {
		level := slog.LevelWarn
		if apierrors.IsConflict(err) {
			// A write raced a newer version than the cache held: routine, retried.
			level = slog.LevelDebug
		}
		log.Log(ctx, level, "sync failed; will retry", "key", key, "err", err)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// RequeueAfterError tells RunKeyWorkers to look at the key again after a delay without
// counting it as a failure: the object is waiting for something that sends no event.
type RequeueAfterError struct {
	After  time.Duration
	Reason string
}

func (e *RequeueAfterError) Error() string {
	return fmt.Sprintf("requeue after %s: %s", e.After, e.Reason)
}

// RequeueAfter returns a RequeueAfterError.
func RequeueAfter(d time.Duration, reason string) error {
	return &RequeueAfterError{After: d, Reason: reason}
}
