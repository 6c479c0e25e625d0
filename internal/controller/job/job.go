// Package job runs a Job's pods to completion: parallelism and completions, NonIndexed
// and Indexed completion modes, backoffLimit with exponential back-off,
// activeDeadlineSeconds, podFailurePolicy and suspend. Finished pods are counted
// through the batch.kubernetes.io/job-tracking finalizer and
// status.uncountedTerminatedPods as upstream, so no pod is counted twice or lost across
// restarts and pod garbage collection.
package job

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// Back-off between pod failures: 10s, doubling, capped at 6 minutes.
const (
	DefaultBackoff = 10 * time.Second
	MaxBackoff     = 6 * time.Minute
)

// orphanPrefix marks queue keys that name a pod whose Job is gone but which still
// carries the tracking finalizer.
const orphanPrefix = "orphan-pod:"

var jobGVK = batchv1.SchemeGroupVersion.WithKind("Job")

// Controller is the job controller.
type Controller struct {
	client       kubernetes.Interface
	jobs         batchlisters.JobLister
	pods         corelisters.PodLister
	podInformer  cache.SharedIndexInformer
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *util.Expectations
	clock        clock.Clock
	events       *util.Events
	recorder     record.EventRecorder

	// uncounting remembers pods whose finalizer this controller removed after counting
	// them, until the cache shows the removal, so a stale cache cannot count them twice.
	mu         sync.Mutex
	uncounting map[types.UID]bool
}

// New returns the job controller with its informers registered on f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	jobInf, podInf := f.Batch().V1().Jobs(), f.Core().V1().Pods()
	c := &Controller{
		client:       client,
		jobs:         jobInf.Lister(),
		pods:         podInf.Lister(),
		podInformer:  podInf.Informer(),
		synced:       []cache.InformerSynced{jobInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:        util.NewQueue("job"),
		expectations: util.NewExpectations(clk.Now),
		clock:        clk,
		uncounting:   map[types.UID]bool{},
		events:       util.NewEvents(client, "job-controller"),
	}
	c.recorder = c.events
	util.IndexByController(podInf.Informer())
	jobInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
		DeleteFunc: c.deleteJob,
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.podEvent(nil, obj.(*corev1.Pod), false) },
		UpdateFunc: func(oldObj, obj any) {
			c.podEvent(oldObj.(*corev1.Pod), obj.(*corev1.Pod), false)
		},
		DeleteFunc: func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					pod, _ = tomb.Obj.(*corev1.Pod)
				}
			}
			if pod != nil {
				c.podEvent(nil, pod, true)
			}
		},
	})
	return c
}

// Run starts workers; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, "job", c.queue, workers, c.Sync, c.synced...)
}

func hasFinalizer(pod *corev1.Pod) bool {
	for _, f := range pod.Finalizers {
		if f == batchv1.JobTrackingFinalizer {
			return true
		}
	}
	return false
}

func (c *Controller) podEvent(oldPod, pod *corev1.Pod, deleted bool) {
	if deleted || !hasFinalizer(pod) {
		c.mu.Lock()
		delete(c.uncounting, pod.UID)
		c.mu.Unlock()
	}
	ref := metav1.GetControllerOf(pod)
	refChanged := oldPod != nil && !reflect.DeepEqual(metav1.GetControllerOf(oldPod), ref)
	if refChanged {
		// The old Job lost this pod (orphaned or taken over): it counts again.
		if old := metav1.GetControllerOf(oldPod); old != nil && old.Kind == jobGVK.Kind {
			if job, err := c.jobs.Jobs(pod.Namespace).Get(old.Name); err == nil && job.UID == old.UID {
				c.queue.Add(pod.Namespace + "/" + job.Name)
			}
		}
	}
	if ref == nil || ref.Kind != jobGVK.Kind || ref.APIVersion != jobGVK.GroupVersion().String() {
		if ref == nil && hasFinalizer(pod) && !deleted {
			c.queue.Add(orphanPrefix + pod.Namespace + "/" + pod.Name)
		}
		// An orphan, new or with new labels or just orphaned: the Jobs whose selector
		// matches it may adopt it, as upstream's.
		if ref == nil && !deleted && (oldPod == nil || refChanged || !reflect.DeepEqual(oldPod.Labels, pod.Labels)) {
			c.enqueueMatching(pod)
		}
		return
	}
	job, err := c.jobs.Jobs(pod.Namespace).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		if hasFinalizer(pod) && !deleted {
			c.queue.Add(orphanPrefix + pod.Namespace + "/" + pod.Name)
		}
		return
	}
	key := pod.Namespace + "/" + job.Name
	switch {
	case deleted:
		c.expectations.DeletionObserved(key, pod.UID)
	case oldPod == nil && pod.DeletionTimestamp == nil:
		c.expectations.CreationObserved(key)
	case pod.DeletionTimestamp != nil && (oldPod == nil || oldPod.DeletionTimestamp == nil):
		c.expectations.DeletionObserved(key, pod.UID)
	}
	c.queue.Add(key)
}

// enqueueMatching enqueues every Job whose selector matches the orphan pod.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	jobs, err := c.jobs.Jobs(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, job := range jobs {
		sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
		if err != nil || job.Spec.Selector == nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(pod.Namespace + "/" + job.Name)
		}
	}
}

func (c *Controller) deleteJob(obj any) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if job, ok = tomb.Obj.(*batchv1.Job); !ok {
			return
		}
	}
	c.expectations.Delete(job.Namespace + "/" + job.Name)
	pods, _ := c.pods.Pods(job.Namespace).List(labels.Everything())
	for _, p := range pods {
		if hasFinalizer(p) && util.IsControlledBy(p, job) {
			c.queue.Add(orphanPrefix + p.Namespace + "/" + p.Name)
		}
	}
}

// removeFinalizer drops the tracking finalizer from pod; a pod already gone is fine.
func (c *Controller) removeFinalizer(ctx context.Context, pod *corev1.Pod) error {
	patch := []byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + batchv1.JobTrackingFinalizer + `"],"uid":"` + string(pod.UID) + `"}}`)
	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// syncOrphanPod releases a finished or orphaned pod from the tracking finalizer once no
// live Job will count it.
func (c *Controller) syncOrphanPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(strings.TrimPrefix(key, orphanPrefix))
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || !hasFinalizer(pod) {
		return err
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == jobGVK.Kind {
		if job, err := c.jobs.Jobs(ns).Get(ref.Name); err == nil && job.UID == ref.UID && !isFinished(job) {
			return nil
		}
	}
	return c.removeFinalizer(ctx, pod)
}

func isFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
