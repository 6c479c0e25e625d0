// Package replicaset keeps the number of pods of a ReplicaSet, or of a
// ReplicationController, equal to its replicas: it creates pods from the template in
// slow-start batches, deletes the cheapest ones first, adopts matching orphans, releases
// pods that stop matching and reports status. One implementation serves both kinds.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// BurstReplicas caps how many pods one sync creates or deletes.
const BurstReplicas = 500

// Controller is the replica controller for one kind (ReplicaSet or
// ReplicationController).
type Controller struct {
	name         string
	client       kubernetes.Interface
	kind         kind
	pods         corelisters.PodLister
	podInformer  cache.SharedIndexInformer
	podsSynced   cache.InformerSynced
	ownersSynced cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *util.Expectations
	clock        clock.Clock
	events       *util.Events
	recorder     record.EventRecorder
}

// NewReplicaSet returns the ReplicaSet controller, its informers registered on f.
func NewReplicaSet(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	return newController("replicaset", "replicaset", "replicaset-controller", client, f, newReplicaSetKind(client, f), clk)
}

// NewReplicationController returns the ReplicationController controller.
func NewReplicationController(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	return newController("replicationcontroller", "replicationmanager", "replication-controller", client, f, newRCKind(client, f), clk)
}

// newController builds either controller; queueName is upstream's, as the work queue
// metrics show it.
func newController(name, queueName, component string, client kubernetes.Interface, f informers.SharedInformerFactory, k kind, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	podInf := f.Core().V1().Pods()
	c := &Controller{
		name:         name,
		client:       client,
		kind:         k,
		pods:         podInf.Lister(),
		podInformer:  podInf.Informer(),
		podsSynced:   podInf.Informer().HasSynced,
		ownersSynced: k.informer().HasSynced,
		queue:        util.NewQueue(queueName),
		expectations: util.NewExpectations(clk.Now),
		clock:        clk,
		events:       util.NewEvents(client, component),
	}
	c.recorder = c.events
	util.IndexByController(podInf.Informer())
	k.informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.expectations.Delete(key)
				c.queue.Add(key)
			}
		},
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	})
	return c
}

// Run starts workers goroutines; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, c.name, c.queue, workers, c.Sync, c.podsSynced, c.ownersSynced)
}

// ownerKey returns the key of pod's controller if it is of this kind.
func (c *Controller) ownerKey(pod *corev1.Pod, ref *metav1.OwnerReference) string {
	gvk := c.kind.gvk()
	if ref == nil || ref.Kind != gvk.Kind || ref.APIVersion != gvk.GroupVersion().String() {
		return ""
	}
	owner, err := c.kind.object(pod.Namespace, ref.Name)
	if err != nil || owner.GetUID() != ref.UID {
		return ""
	}
	return pod.Namespace + "/" + ref.Name
}

// enqueueMatching enqueues every owner of this kind whose selector matches an orphan.
func (c *Controller) enqueueMatching(pod *corev1.Pod) {
	all, err := c.kind.list(pod.Namespace)
	if err != nil {
		return
	}
	for _, r := range all {
		if r.selector.Matches(labels.Set(pod.Labels)) {
			c.queue.Add(pod.Namespace + "/" + r.GetName())
		}
	}
}

func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if key := c.ownerKey(pod, metav1.GetControllerOf(pod)); key != "" {
		if pod.DeletionTimestamp != nil {
			c.expectations.DeletionObserved(key, pod.UID)
		} else {
			c.expectations.CreationObserved(key)
		}
		c.queue.Add(key)
		return
	}
	if metav1.GetControllerOf(pod) == nil {
		c.enqueueMatching(pod)
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	oldPod, pod := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if oldPod.ResourceVersion == pod.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(oldPod), metav1.GetControllerOf(pod)
	if oldKey := c.ownerKey(oldPod, oldRef); oldKey != "" && !apiequality.Semantic.DeepEqual(oldRef, ref) {
		c.queue.Add(oldKey)
	}
	if key := c.ownerKey(pod, ref); key != "" {
		if pod.DeletionTimestamp != nil && oldPod.DeletionTimestamp == nil {
			c.expectations.DeletionObserved(key, pod.UID)
		}
		c.queue.Add(key)
		// A pod that just became ready turns available minReadySeconds later.
		if !util.IsPodReady(oldPod) && util.IsPodReady(pod) {
			if r, err := c.kind.get(pod.Namespace, ref.Name); err == nil && r.minReadySeconds > 0 {
				c.queue.AddAfter(key, time.Duration(r.minReadySeconds)*time.Second+time.Second)
			}
		}
		return
	}
	if ref == nil {
		c.enqueueMatching(pod)
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	if key := c.ownerKey(pod, metav1.GetControllerOf(pod)); key != "" {
		c.expectations.DeletionObserved(key, pod.UID)
		c.queue.Add(key)
	}
}

// Sync reconciles the object named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	r, err := c.kind.get(ns, name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	satisfied := c.expectations.Satisfied(key)

	all, err := util.ControlledOrOrphans[*corev1.Pod](c.podInformer, ns, r.GetUID())
	if err != nil {
		return err
	}
	claimer := util.Claimer{Owner: r, OwnerGVK: c.kind.gvk(), Selector: r.selector, Patch: util.PodPatcher(c.client, ns)}
	pods, claimErr := util.Claim(ctx, claimer, util.FilterActivePods(all))

	var manageErr error
	allSent := false
	if satisfied && r.GetDeletionTimestamp() == nil {
		allSent, manageErr = c.manageReplicas(ctx, key, r, pods)
	}

	status := c.computeStatus(r, pods, manageErr)
	// A sync that has just created (or deleted) every pod the set lacked (or had too
	// many of) writes no status: those pods arriving in (or leaving) the cache sync
	// the set again moments later, and that sync writes the count with them. The count
	// without them would be a write, and an event to every watcher of the set, that
	// the next one overwrites. A sync held back by BurstReplicas still writes its
	// count, so a large scale-up shows its progress.
	if !allSent && !apiequality.Semantic.DeepEqual(status, r.status) {
		if err := c.kind.updateStatus(ctx, r, status); err != nil && !apierrors.IsNotFound(err) {
			return errors.Join(claimErr, manageErr, err)
		}
	}
	if manageErr == nil && claimErr == nil && r.minReadySeconds > 0 &&
		status.ReadyReplicas == r.replicas && status.AvailableReplicas != r.replicas {
		c.queue.AddAfter(key, time.Duration(r.minReadySeconds)*time.Second)
	}
	return errors.Join(claimErr, manageErr)
}

// manageReplicas creates or deletes pods so that len(pods) approaches r.replicas. It
// reports whether it sent every create or delete the set needed, and all succeeded.
func (c *Controller) manageReplicas(ctx context.Context, key string, r *replicated, pods []*corev1.Pod) (bool, error) {
	diff := len(pods) - int(r.replicas)
	switch {
	case diff < 0:
		n := min(-diff, BurstReplicas)
		c.expectations.Expect(key, n, nil)
		created, err := util.SlowStartBatch(n, func() error {
			pod := util.PodFromTemplate(r.template, r, c.kind.gvk(), "", r.GetName()+"-")
			name, err := util.CreatePod(ctx, c.client, pod)
			if err != nil {
				c.recorder.Eventf(r.runtimeObject(), corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
				return err
			}
			c.recorder.Eventf(r.runtimeObject(), corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", name)
			return nil
		})
		// Failed or never attempted creations will never be observed.
		for range n - created {
			c.expectations.CreationObserved(key)
		}
		if err != nil {
			return false, fmt.Errorf("creating pods for %s: %w", key, err)
		}
		return n == -diff, nil
	case diff > 0:
		victims := podsToDelete(pods, min(diff, BurstReplicas))
		uids := make([]types.UID, len(victims))
		for i, p := range victims {
			uids[i] = p.UID
		}
		c.expectations.Expect(key, 0, uids)
		var wg sync.WaitGroup
		errs := make([]error, len(victims))
		for i, p := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
				if err != nil {
					c.expectations.DeletionObserved(key, p.UID)
					if !apierrors.IsNotFound(err) {
						c.recorder.Eventf(r.runtimeObject(), corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
						errs[i] = err
					}
					return
				}
				c.recorder.Eventf(r.runtimeObject(), corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return false, fmt.Errorf("deleting pods of %s: %w", key, err)
		}
		slog.Debug("deleted pods", "controller", c.name, "key", key, "count", len(victims))
		return len(victims) == diff, nil
	}
	return false, nil
}

func (c *Controller) computeStatus(r *replicated, pods []*corev1.Pod, manageErr error) appsv1.ReplicaSetStatus {
	st := appsv1.ReplicaSetStatus{ObservedGeneration: r.GetGeneration(), Replicas: int32(len(pods))}
	templateLabels := labels.Set(r.template.Labels).AsSelectorPreValidated()
	now := c.clock.Now()
	for _, p := range pods {
		if templateLabels.Matches(labels.Set(p.Labels)) {
			st.FullyLabeledReplicas++
		}
		if util.IsPodReady(p) {
			st.ReadyReplicas++
			if util.IsPodAvailable(p, r.minReadySeconds, now) {
				st.AvailableReplicas++
			}
		}
	}
	// ReplicaFailure is kept while creating or deleting fails, as upstream reports
	// quota and admission rejections.
	for _, cond := range r.status.Conditions {
		if cond.Type != appsv1.ReplicaSetReplicaFailure {
			st.Conditions = append(st.Conditions, cond)
		}
	}
	if manageErr != nil {
		reason := "FailedCreate"
		if len(pods) > int(r.replicas) {
			reason = "FailedDelete"
		}
		cond := appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: manageErr.Error()}
		for _, old := range r.status.Conditions {
			if old.Type == cond.Type && old.Reason == cond.Reason && old.Message == cond.Message {
				cond.LastTransitionTime = old.LastTransitionTime
			}
		}
		st.Conditions = append(st.Conditions, cond)
	}
	return st
}
