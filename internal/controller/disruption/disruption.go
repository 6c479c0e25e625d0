// Package disruption keeps PodDisruptionBudget status current: how many of the pods its
// selector matches are healthy, how many must stay healthy (from minAvailable or
// maxUnavailable and the scale of the pods' controllers), and so how many voluntary
// disruptions (evictions) are allowed now.
package disruption

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// DeletionTimeout is how long an eviction's entry in status.disruptedPods is trusted
// before the pod counts as healthy again (the eviction's delete never happened).
const DeletionTimeout = 2 * time.Minute

// Condition reasons of DisruptionAllowed, as upstream.
const (
	ReasonSufficientPods   = policyv1.SufficientPodsReason
	ReasonInsufficientPods = policyv1.InsufficientPodsReason
	ReasonSyncFailed       = policyv1.SyncFailedReason
)

// Controller is the disruption controller.
type Controller struct {
	client      kubernetes.Interface
	pdbs        policylisters.PodDisruptionBudgetLister
	pods        corelisters.PodLister
	rcs         corelisters.ReplicationControllerLister
	rss         appslisters.ReplicaSetLister
	deployments appslisters.DeploymentLister
	sets        appslisters.StatefulSetLister
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	clock       clock.Clock
	events      *util.Events
	recorder    record.EventRecorder
}

// New returns the disruption controller with its informers registered on f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	pdbInf, podInf := f.Policy().V1().PodDisruptionBudgets(), f.Core().V1().Pods()
	rcInf, rsInf := f.Core().V1().ReplicationControllers(), f.Apps().V1().ReplicaSets()
	dInf, ssInf := f.Apps().V1().Deployments(), f.Apps().V1().StatefulSets()
	c := &Controller{
		client: client, pdbs: pdbInf.Lister(), pods: podInf.Lister(), rcs: rcInf.Lister(), rss: rsInf.Lister(),
		deployments: dInf.Lister(), sets: ssInf.Lister(),
		synced: []cache.InformerSynced{pdbInf.Informer().HasSynced, podInf.Informer().HasSynced, rcInf.Informer().HasSynced,
			rsInf.Informer().HasSynced, dInf.Informer().HasSynced, ssInf.Informer().HasSynced},
		queue:  util.NewQueue("disruption"),
		clock:  clk,
		events: util.NewEvents(client, "controllermanager"),
	}
	c.recorder = c.events
	pdbInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueForPod,
		UpdateFunc: func(oldObj, obj any) { c.enqueueForPod(oldObj); c.enqueueForPod(obj) },
		DeleteFunc: c.enqueueForPod,
	})
	// A controller's scale changes expectedPods of the budgets over its pods.
	scaleChanged := cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueNamespace,
		UpdateFunc: func(_, obj any) { c.enqueueNamespace(obj) },
		DeleteFunc: c.enqueueNamespace,
	}
	for _, inf := range []cache.SharedIndexInformer{rcInf.Informer(), rsInf.Informer(), dInf.Informer(), ssInf.Informer()} {
		inf.AddEventHandler(scaleChanged)
	}
	return c
}

// Run starts workers; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, "disruption", c.queue, workers, c.Sync, c.synced...)
}

func objectOf(obj any) metav1.Object {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return m
}

func (c *Controller) enqueueForPod(obj any) {
	pod := objectOf(obj)
	if pod == nil {
		return
	}
	pdbs, _ := c.pdbs.PodDisruptionBudgets(pod.GetNamespace()).List(labels.Everything())
	for _, pdb := range pdbs {
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && pdb.Spec.Selector != nil &&
			sel.Matches(labels.Set(pod.GetLabels())) {
			c.queue.Add(pdb.Namespace + "/" + pdb.Name)
		}
	}
}

func (c *Controller) enqueueNamespace(obj any) {
	o := objectOf(obj)
	if o == nil {
		return
	}
	pdbs, _ := c.pdbs.PodDisruptionBudgets(o.GetNamespace()).List(labels.Everything())
	for _, pdb := range pdbs {
		c.queue.Add(pdb.Namespace + "/" + pdb.Name)
	}
}

// Sync recomputes the status of the budget named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.pdbs.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pdb := cached.DeepCopy()
	pods, err := c.matchingPods(pdb)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	if len(pods) == 0 {
		c.recorder.Event(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, calcErr := c.expectedAndDesired(pdb, pods)
	if calcErr != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", calcErr)
	}
	disrupted, recheck := c.liveDisruptedPods(pdb, pods, now)
	healthy := int32(0)
	for _, p := range pods {
		if p.DeletionTimestamp == nil && util.IsPodReady(p) && !disrupted[p.Name] {
			healthy++
		}
	}

	st := policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      pdb.Status.DisruptedPods,
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		Conditions:         append([]metav1.Condition(nil), pdb.Status.Conditions...),
	}
	if len(disrupted) == 0 {
		st.DisruptedPods = nil
	} else {
		st.DisruptedPods = map[string]metav1.Time{}
		for name := range disrupted {
			st.DisruptedPods[name] = pdb.Status.DisruptedPods[name]
		}
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.NewTime(now)}
	switch {
	case calcErr != nil:
		// Fail safe: when we cannot tell how many pods there should be, allow nothing.
		st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods, st.DisruptionsAllowed = 0, 0, 0, 0
		st.DisruptedPods = pdb.Status.DisruptedPods
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonSyncFailed, calcErr.Error()
	default:
		st.DisruptionsAllowed = max(healthy-desired, 0)
		if st.DisruptionsAllowed > 0 {
			cond.Status, cond.Reason = metav1.ConditionTrue, ReasonSufficientPods
		} else {
			cond.Status, cond.Reason = metav1.ConditionFalse, ReasonInsufficientPods
		}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if !apiequality.Semantic.DeepEqual(st, pdb.Status) {
		pdb.Status = st
		if _, err := c.client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}
	return nil
}

// matchingPods: a nil selector matches nothing, an empty one everything.
func (c *Controller) matchingPods(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	if pdb.Spec.Selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, nil
	}
	return c.pods.Pods(pdb.Namespace).List(sel)
}

// expectedAndDesired returns expectedPods and desiredHealthy: minAvailable as a number
// counts the pods present; a percentage, or maxUnavailable, is taken of the scale of
// the pods' controllers.
func (c *Controller) expectedAndDesired(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (int32, int32, error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expected, err := c.expectedScale(pods)
		if err != nil {
			return 0, 0, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, err
		}
		return expected, max(expected-int32(maxUnavailable), 0), nil
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		return int32(len(pods)), pdb.Spec.MinAvailable.IntVal, nil
	case pdb.Spec.MinAvailable != nil:
		expected, err := c.expectedScale(pods)
		if err != nil {
			return 0, 0, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, err
		}
		return expected, int32(minAvailable), nil
	}
	return int32(len(pods)), 0, nil
}

// expectedScale sums the replicas of the distinct controllers of pods. A pod without a
// known scalable controller makes the number unknowable.
func (c *Controller) expectedScale(pods []*corev1.Pod) (int32, error) {
	seen := map[types.UID]bool{}
	var total int32
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			return 0, fmt.Errorf("found no controller ref for pod %q", p.Name)
		}
		uid, replicas, err := c.scaleOf(p.Namespace, ref)
		if err != nil {
			return 0, err
		}
		if !seen[uid] {
			seen[uid] = true
			total += replicas
		}
	}
	return total, nil
}

// scaleOf finds the scalable controller behind ref: a Deployment through its
// ReplicaSet, or the ReplicaSet, ReplicationController or StatefulSet itself.
func (c *Controller) scaleOf(ns string, ref *metav1.OwnerReference) (types.UID, int32, error) {
	replicas := func(p *int32) int32 {
		if p == nil {
			return 1
		}
		return *p
	}
	switch ref.Kind {
	case "ReplicaSet":
		rs, err := c.rss.ReplicaSets(ns).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			return "", 0, fmt.Errorf("replica set %q of a selected pod not found", ref.Name)
		}
		if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
			d, err := c.deployments.Deployments(ns).Get(dref.Name)
			if err != nil || d.UID != dref.UID {
				return "", 0, fmt.Errorf("deployment %q of a selected pod not found", dref.Name)
			}
			return d.UID, replicas(d.Spec.Replicas), nil
		}
		return rs.UID, replicas(rs.Spec.Replicas), nil
	case "ReplicationController":
		rc, err := c.rcs.ReplicationControllers(ns).Get(ref.Name)
		if err != nil || rc.UID != ref.UID {
			return "", 0, fmt.Errorf("replication controller %q of a selected pod not found", ref.Name)
		}
		return rc.UID, replicas(rc.Spec.Replicas), nil
	case "StatefulSet":
		ss, err := c.sets.StatefulSets(ns).Get(ref.Name)
		if err != nil || ss.UID != ref.UID {
			return "", 0, fmt.Errorf("stateful set %q of a selected pod not found", ref.Name)
		}
		return ss.UID, replicas(ss.Spec.Replicas), nil
	}
	return "", 0, fmt.Errorf("pods controlled by a %s are not supported with a percentage or maxUnavailable budget", ref.Kind)
}

// liveDisruptedPods keeps the entries of status.disruptedPods (written by the eviction
// API) whose pods still exist, are not yet being deleted and were evicted less than
// DeletionTimeout ago; it returns when the oldest live entry expires.
func (c *Controller) liveDisruptedPods(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (map[string]bool, time.Duration) {
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	live := map[string]bool{}
	recheck := time.Duration(math.MaxInt64)
	for name, at := range pdb.Status.DisruptedPods {
		p, ok := byName[name]
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		expires := at.Add(DeletionTimeout)
		if !expires.After(now) {
			continue
		}
		live[name] = true
		recheck = min(recheck, expires.Sub(now))
	}
	if len(live) == 0 {
		return live, 0
	}
	return live, recheck
}
