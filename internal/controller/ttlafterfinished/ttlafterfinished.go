// Package ttlafterfinished deletes finished Jobs once ttlSecondsAfterFinished has passed
// since they completed or failed; their pods go with them by background cascade.
package ttlafterfinished

import (
	"context"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// Controller is the ttl-after-finished controller.
type Controller struct {
	client kubernetes.Interface
	jobs   batchlisters.JobLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	clock  clock.Clock
}

// New returns the controller with its informer registered on f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	inf := f.Batch().V1().Jobs()
	c := &Controller{client: client, jobs: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: util.NewQueue("ttl_jobs_to_delete"), clock: clk}
	enqueue := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok && j.Spec.TTLSecondsAfterFinished != nil && j.DeletionTimestamp == nil {
			util.Enqueue(c.queue, obj)
		}
	}
	inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return c
}

// Run starts workers; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunWorkers(ctx, "ttl-after-finished", c.queue, workers, c.Sync, c.synced)
}

// expiresAt returns when a finished job with a TTL may be deleted; ok is false for
// jobs without a TTL or not finished.
func expiresAt(j *batchv1.Job) (time.Time, bool) {
	if j.Spec.TTLSecondsAfterFinished == nil || j.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			finished := c.LastTransitionTime.Time
			if j.Status.CompletionTime != nil && c.Type == batchv1.JobComplete {
				finished = j.Status.CompletionTime.Time
			}
			return finished.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second), true
		}
	}
	return time.Time{}, false
}

// Sync deletes the job named by key if its TTL has expired, or checks again when it will.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	at, ok := expiresAt(cached)
	if !ok {
		return nil
	}
	if wait := at.Sub(c.clock.Now()); wait > 0 {
		c.queue.AddAfter(key, wait)
		return nil
	}
	// The cache may be stale (the TTL may have been raised): decide on a fresh read,
	// and delete only that version.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	at, ok = expiresAt(fresh)
	if !ok {
		return nil
	}
	if wait := at.Sub(c.clock.Now()); wait > 0 {
		c.queue.AddAfter(key, wait)
		return nil
	}
	background := metav1.DeletePropagationBackground
	pre := &metav1.Preconditions{UID: &fresh.UID}
	if fresh.ResourceVersion != "" {
		pre.ResourceVersion = &fresh.ResourceVersion
	}
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background, Preconditions: pre})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	slog.Info("deleted finished job after its TTL", "controller", "ttl-after-finished", "job", key)
	return nil
}
