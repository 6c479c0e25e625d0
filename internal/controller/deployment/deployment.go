// Package deployment rolls a Deployment's pod template out through ReplicaSets: one
// ReplicaSet per template (named <deployment>-<pod-template-hash>), scaled up and down
// by the RollingUpdate or Recreate strategy, with revisions, rollback by reusing an old
// ReplicaSet, pause, proportional scaling, progress deadlines and status.
package deployment

import (
	"context"
	"errors"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

var deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Controller is the deployment controller.
type Controller struct {
	client      kubernetes.Interface
	deployments appslisters.DeploymentLister
	rss         appslisters.ReplicaSetLister
	rsInformer  cache.SharedIndexInformer
	pods        corelisters.PodLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	clock       clock.Clock
	events      *util.Events
	recorder    record.EventRecorder
}

// New returns the deployment controller with its informers registered on f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	dInf, rsInf, podInf := f.Apps().V1().Deployments(), f.Apps().V1().ReplicaSets(), f.Core().V1().Pods()
	c := &Controller{
		client:      client,
		deployments: dInf.Lister(),
		rss:         rsInf.Lister(),
		rsInformer:  rsInf.Informer(),
		pods:        podInf.Lister(),
		synced:      []cache.InformerSynced{dInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
		queue:       util.NewQueue("deployment"),
		clock:       clk,
		events:      util.NewEvents(client, "deployment-controller"),
	}
	c.recorder = c.events
	util.IndexByController(rsInf.Informer())
	dInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
		DeleteFunc: func(obj any) { util.Enqueue(c.queue, obj) },
	})
	rsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueForReplicaSet(obj) },
		UpdateFunc: func(oldObj, obj any) {
			c.enqueueForReplicaSet(oldObj)
			c.enqueueForReplicaSet(obj)
		},
		DeleteFunc: func(obj any) { c.enqueueForReplicaSet(obj) },
	})
	// Recreate waits for old pods to be gone before it creates the new ReplicaSet.
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					pod, _ = tomb.Obj.(*corev1.Pod)
				}
			}
			if pod == nil {
				return
			}
			if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "ReplicaSet" {
				if rs, err := c.rss.ReplicaSets(pod.Namespace).Get(ref.Name); err == nil {
					c.enqueueForReplicaSet(rs)
				}
			}
		},
	})
	return c
}

// Run starts workers; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, "deployment", c.queue, workers, c.Sync, c.synced...)
}

func (c *Controller) enqueueForReplicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if rs, ok = tomb.Obj.(*appsv1.ReplicaSet); !ok {
			return
		}
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if ref.Kind == deploymentGVK.Kind {
			c.queue.Add(rs.Namespace + "/" + ref.Name)
		}
		return
	}
	all, err := c.deployments.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range all {
		if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) {
			c.queue.Add(d.Namespace + "/" + d.Name)
		}
	}
}

// Sync reconciles the deployment named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.deployments.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	d := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		// An empty selector would select every ReplicaSet; refuse, as upstream does.
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, err := c.client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
			return err
		}
		return nil
	}
	rsList, err := c.claimReplicaSets(ctx, d, sel)
	if err != nil {
		return err
	}
	copies := make([]*appsv1.ReplicaSet, len(rsList))
	for i, rs := range rsList {
		copies[i] = rs.DeepCopy()
	}
	s := &syncer{c: c, d: d, orig: *cached.Status.DeepCopy(), rsList: copies, now: c.clock.Now()}
	if d.DeletionTimestamp != nil {
		return s.syncStatusOnly(ctx)
	}
	s.checkPausedCondition()
	if d.Spec.Paused {
		return s.syncScaleAndStatus(ctx)
	}
	if s.isScalingEvent() {
		return s.syncScaleAndStatus(ctx)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return s.rolloutRecreate(ctx)
	}
	return s.rolloutRolling(ctx)
}

func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment, sel labels.Selector) ([]*appsv1.ReplicaSet, error) {
	all, err := util.ControlledOrOrphans[*appsv1.ReplicaSet](c.rsInformer, d.Namespace, d.UID)
	if err != nil {
		return nil, err
	}
	claimer := util.Claimer{Owner: d, OwnerGVK: deploymentGVK, Selector: sel,
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := c.client.AppsV1().ReplicaSets(d.Namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		}}
	return util.Claim(ctx, claimer, all)
}

// oldPodsRunning reports whether any pod of the old ReplicaSets may still run (Recreate
// must not start new pods before).
func (c *Controller) oldPodsRunning(ns string, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) (bool, error) {
	for _, rs := range oldRSs {
		if rs.Status.Replicas > 0 {
			return true, nil
		}
	}
	pods, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || (newRS != nil && ref.UID == newRS.UID) {
			continue
		}
		for _, rs := range oldRSs {
			if ref.UID == rs.UID {
				switch p.Status.Phase {
				case corev1.PodFailed, corev1.PodSucceeded:
				case corev1.PodUnknown:
					// Maybe running on an unreachable node: wait, as upstream does.
					return true, nil
				default:
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// requeueAfter schedules another sync of d (a progress deadline or minReadySeconds).
func (c *Controller) requeueAfter(d *appsv1.Deployment, after time.Duration) {
	if after <= 0 {
		return
	}
	c.queue.AddAfter(d.Namespace+"/"+d.Name, after)
}

func logFor(d *appsv1.Deployment) *slog.Logger {
	return slog.With("controller", "deployment", "deployment", d.Namespace+"/"+d.Name)
}

var errCollision = errors.New("hash collision with an existing ReplicaSet")
