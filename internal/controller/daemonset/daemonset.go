// Package daemonset runs one pod of a DaemonSet on every eligible node: nodes that
// match its nodeSelector and required node affinity and whose taints it tolerates (with
// the automatic daemon tolerations). Pods are pinned to their node through a required
// node affinity on metadata.name and placed by the scheduler. Template changes roll out
// by RollingUpdate (maxUnavailable or maxSurge) or OnDelete, with history kept in
// ControllerRevisions.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"mizzen/internal/controller/util"
)

// PodTemplateGenerationLabel carries the DaemonSet generation a pod was made at
// (deprecated upstream, still set).
const PodTemplateGenerationLabel = "pod-template-generation"

var dsGVK = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Controller is the daemonset controller.
type Controller struct {
	client       kubernetes.Interface
	sets         appslisters.DaemonSetLister
	nodes        corelisters.NodeLister
	pods         corelisters.PodLister
	podInformer  cache.SharedIndexInformer
	revisions    appslisters.ControllerRevisionLister
	synced       []cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	expectations *util.Expectations
	clock        clock.Clock
	// failedPods spaces out the replacement of failed daemon pods per DaemonSet and
	// node (1s doubling to 15 minutes), so a pod failing at once does not hot-loop.
	failedPods *flowcontrol.Backoff
	events     *util.Events
	recorder   record.EventRecorder
}

// New returns the daemonset controller with its informers registered on f.
func New(client kubernetes.Interface, f informers.SharedInformerFactory, clk clock.Clock) *Controller {
	if clk == nil {
		clk = clock.RealClock{}
	}
	dsInf, nodeInf, podInf, revInf := f.Apps().V1().DaemonSets(), f.Core().V1().Nodes(), f.Core().V1().Pods(), f.Apps().V1().ControllerRevisions()
	c := &Controller{
		client: client, sets: dsInf.Lister(), nodes: nodeInf.Lister(), pods: podInf.Lister(), podInformer: podInf.Informer(), revisions: revInf.Lister(),
		synced: []cache.InformerSynced{dsInf.Informer().HasSynced, nodeInf.Informer().HasSynced, podInf.Informer().HasSynced, revInf.Informer().HasSynced},
		queue:  util.NewQueue("daemonset"), expectations: util.NewExpectations(clk.Now), clock: clk,
		failedPods: flowcontrol.NewFakeBackOff(time.Second, 15*time.Minute, clk),
		events:     util.NewEvents(client, "daemonset-controller"),
	}
	c.recorder = c.events
	util.IndexByController(podInf.Informer())
	dsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.expectations.Delete(key)
			}
		},
	})
	// Any node change may change where daemons belong.
	nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAll() },
		UpdateFunc: func(oldObj, obj any) { c.nodeChanged(oldObj.(*corev1.Node), obj.(*corev1.Node)) },
		DeleteFunc: func(any) { c.enqueueAll() },
	})
	podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podEvent(nil, obj.(*corev1.Pod), false) },
		UpdateFunc: func(oldObj, obj any) { c.podEvent(oldObj.(*corev1.Pod), obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				c.podEvent(nil, pod, true)
			}
		},
	})
	return c
}

// Run starts workers; it does not block.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunWorkers(ctx, "daemonset", c.queue, workers, c.Sync, c.synced...)
}

func (c *Controller) enqueueAll() {
	all, _ := c.sets.List(labels.Everything())
	for _, ds := range all {
		c.queue.Add(ds.Namespace + "/" + ds.Name)
	}
}

func (c *Controller) nodeChanged(oldNode, node *corev1.Node) {
	if apiequality.Semantic.DeepEqual(oldNode.Labels, node.Labels) && apiequality.Semantic.DeepEqual(oldNode.Spec.Taints, node.Spec.Taints) &&
		oldNode.Spec.Unschedulable == node.Spec.Unschedulable {
		return
	}
	c.enqueueAll()
}

func (c *Controller) podEvent(oldPod, pod *corev1.Pod, deleted bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != dsGVK.Kind {
		return
	}
	ds, err := c.sets.DaemonSets(pod.Namespace).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return
	}
	key := ds.Namespace + "/" + ds.Name
	switch {
	case deleted:
		c.expectations.DeletionObserved(key, pod.UID)
	case oldPod == nil && pod.DeletionTimestamp == nil:
		c.expectations.CreationObserved(key)
	case pod.DeletionTimestamp != nil && (oldPod == nil || oldPod.DeletionTimestamp == nil):
		c.expectations.DeletionObserved(key, pod.UID)
	}
	c.queue.Add(key)
	if oldPod != nil && !util.IsPodReady(oldPod) && util.IsPodReady(pod) && ds.Spec.MinReadySeconds > 0 {
		c.queue.AddAfter(key, time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
	}
}

// dsSync is one pass over one DaemonSet.
type dsSync struct {
	c          *Controller
	key        string
	ds         *appsv1.DaemonSet
	hash       string
	nodes      []*corev1.Node
	nodeToPods map[string][]*corev1.Pod
	now        time.Time
	// fits holds placement per node name, computed once per sync.
	fits                     map[string][2]bool
	maxSurge, maxUnavailable int
}

// placement is the cached placement of node for this sync.
func (s *dsSync) placement(node *corev1.Node) (shouldRun, shouldContinue bool) {
	f, ok := s.fits[node.Name]
	if !ok {
		run, cont := placement(node, s.ds)
		f = [2]bool{run, cont}
		s.fits[node.Name] = f
	}
	return f[0], f[1]
}

// Sync reconciles the DaemonSet named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.sets.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	c.failedPods.GC()
	ds := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil
	}

	history := util.History{Client: c.client, Lister: c.revisions, Owner: ds, OwnerGVK: dsGVK, Selector: sel, Labels: ds.Spec.Template.Labels}
	revs, cur, err := history.Sync(ctx, &ds.Spec.Template, &ds.Status.CollisionCount)
	if err != nil {
		return err
	}

	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	all, err := util.ControlledOrOrphans[*corev1.Pod](c.podInformer, ns, ds.UID)
	if err != nil {
		return err
	}
	claimer := util.Claimer{Owner: ds, OwnerGVK: dsGVK, Selector: sel, Patch: util.PodPatcher(c.client, ns)}
	pods, claimErr := util.Claim(ctx, claimer, all)
	nodeToPods := map[string][]*corev1.Pod{}
	for _, p := range pods {
		nodeToPods[targetNode(p)] = append(nodeToPods[targetNode(p)], p)
	}
	for _, list := range nodeToPods {
		sort.SliceStable(list, func(i, j int) bool {
			if !list[i].CreationTimestamp.Equal(&list[j].CreationTimestamp) {
				return list[i].CreationTimestamp.Before(&list[j].CreationTimestamp)
			}
			return list[i].Name < list[j].Name
		})
	}
	s := &dsSync{c: c, key: key, ds: ds, hash: cur.Labels[util.ControllerRevisionHashLabel], nodes: nodes, nodeToPods: nodeToPods,
		now: c.clock.Now(), fits: make(map[string][2]bool, len(nodes))}
	s.maxSurge, s.maxUnavailable = s.fenceposts()

	var errs []error
	if claimErr != nil {
		errs = append(errs, claimErr)
	}
	if ds.DeletionTimestamp == nil && c.expectations.Satisfied(key) {
		createOn, remove := s.manage()
		if len(createOn) == 0 && len(remove) == 0 && ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			createOn, remove = s.rollingUpdate()
		}
		if err := s.apply(ctx, createOn, remove); err != nil {
			errs = append(errs, err)
		}
		inUse := map[string]bool{}
		for _, p := range pods {
			inUse[p.Labels[util.ControllerRevisionHashLabel]] = true
		}
		limit := 10
		if ds.Spec.RevisionHistoryLimit != nil {
			limit = int(*ds.Spec.RevisionHistoryLimit)
		}
		if err := history.Prune(ctx, revs, cur, inUse, limit); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.updateStatus(ctx, cached); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func livePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// hasPodStillRunning is whether any of a node's daemon pods may still run: a pod being
// deleted counts until it is terminal, as upstream's controller counts it, so that a
// replacement starts only once the pod it replaces has stopped (a rollback then finds
// the old pods it keeps, and the node never runs two).
func hasPodStillRunning(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if p.DeletionTimestamp == nil || !util.IsPodTerminal(p) {
			return true
		}
	}
	return false
}

func (s *dsSync) surging() bool {
	return s.maxSurge > 0
}

// manage decides which nodes need a daemon pod and which pods must go: pods on nodes
// they no longer belong on, failed pods (to be replaced) and duplicates.
func (s *dsSync) manage() (createOn []string, remove []*corev1.Pod) {
	known := map[string]bool{}
	for _, node := range s.nodes {
		known[node.Name] = true
		shouldRun, shouldContinue := s.placement(node)
		live := livePods(s.nodeToPods[node.Name])
		switch {
		case shouldRun && !hasPodStillRunning(s.nodeToPods[node.Name]):
			createOn = append(createOn, node.Name)
		case shouldContinue:
			var running []*corev1.Pod
			for _, p := range live {
				if util.IsPodTerminal(p) {
					backoffKey := s.key + "/" + node.Name
					if s.c.failedPods.IsInBackOffSinceUpdate(backoffKey, s.now) {
						s.c.queue.AddAfter(s.key, s.c.failedPods.Get(backoffKey))
						continue
					}
					s.c.failedPods.Next(backoffKey, s.now)
					s.c.recorder.Eventf(s.ds, corev1.EventTypeWarning, "FailedDaemonPod", "Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node.Name)
					remove = append(remove, p)
				} else {
					running = append(running, p)
				}
			}
			remove = append(remove, s.duplicates(running)...)
		default:
			remove = append(remove, live...)
		}
	}
	// Pods pinned to nodes that no longer exist would stay Pending forever.
	for node, pods := range s.nodeToPods {
		if !known[node] {
			remove = append(remove, livePods(pods)...)
		}
	}
	return createOn, remove
}

// duplicates returns the pods beyond one per node (one per revision while surging),
// keeping the oldest.
func (s *dsSync) duplicates(running []*corev1.Pod) []*corev1.Pod {
	if len(running) <= 1 {
		return nil
	}
	var extra []*corev1.Pod
	keptNew, keptOld := false, false
	for _, p := range running {
		isNew := p.Labels[util.ControllerRevisionHashLabel] == s.hash
		switch {
		case !s.surging() && (keptNew || keptOld):
			extra = append(extra, p)
		case isNew && !keptNew:
			keptNew = true
		case !isNew && !keptOld:
			keptOld = true
		default:
			extra = append(extra, p)
		}
	}
	return extra
}

// fenceposts resolves maxSurge and maxUnavailable against the desired pod count.
func (s *dsSync) fenceposts() (surge, unavailable int) {
	ru := s.ds.Spec.UpdateStrategy.RollingUpdate
	desired := 0
	for _, node := range s.nodes {
		if run, _ := s.placement(node); run {
			desired++
		}
	}
	mu, ms := intstr.FromInt32(1), intstr.FromInt32(0)
	if ru != nil && ru.MaxUnavailable != nil {
		mu = *ru.MaxUnavailable
	}
	if ru != nil && ru.MaxSurge != nil {
		ms = *ru.MaxSurge
	}
	surge, _ = intstr.GetScaledValueFromIntOrPercent(&ms, desired, true)
	unavailable, _ = intstr.GetScaledValueFromIntOrPercent(&mu, desired, true)
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable
}

func (s *dsSync) available(p *corev1.Pod) bool {
	return util.IsPodAvailable(p, s.ds.Spec.MinReadySeconds, s.now)
}

// splitByRevision returns the oldest running pod of the current revision and of any
// older one on a node.
func (s *dsSync) splitByRevision(pods []*corev1.Pod) (newPod, oldPod *corev1.Pod) {
	for _, p := range livePods(pods) {
		if util.IsPodTerminal(p) {
			continue
		}
		if p.Labels[util.ControllerRevisionHashLabel] == s.hash {
			if newPod == nil {
				newPod = p
			}
		} else if oldPod == nil {
			oldPod = p
		}
	}
	return newPod, oldPod
}

// rollingUpdate replaces old pods: with maxSurge 0 it deletes up to maxUnavailable
// available old pods at a time (the next sync creates their replacements); with
// maxSurge it starts new pods beside old ones and deletes an old pod once its
// replacement is available.
func (s *dsSync) rollingUpdate() (createOn []string, remove []*corev1.Pod) {
	maxSurge, maxUnavailable := s.maxSurge, s.maxUnavailable
	if maxSurge == 0 {
		unavailable := 0
		var candidates []*corev1.Pod
		for _, node := range s.nodes {
			if run, _ := s.placement(node); !run {
				continue
			}
			newPod, oldPod := s.splitByRevision(s.nodeToPods[node.Name])
			switch {
			case newPod == nil && oldPod == nil:
				unavailable++
			case newPod != nil:
				if !s.available(newPod) {
					unavailable++
				}
			case !s.available(oldPod):
				// Replacing an unavailable pod costs no availability.
				remove = append(remove, oldPod)
			default:
				candidates = append(candidates, oldPod)
			}
		}
		budget := max(maxUnavailable-unavailable-len(remove), 0)
		return nil, append(remove, candidates[:min(budget, len(candidates))]...)
	}
	surged := 0
	var candidates []string
	for _, node := range s.nodes {
		if run, _ := s.placement(node); !run {
			continue
		}
		newPod, oldPod := s.splitByRevision(s.nodeToPods[node.Name])
		switch {
		case oldPod == nil:
		case newPod == nil && !s.available(oldPod):
			createOn = append(createOn, node.Name)
		case newPod == nil:
			candidates = append(candidates, node.Name)
		case s.available(newPod):
			remove = append(remove, oldPod)
		default:
			surged++
		}
	}
	budget := max(maxSurge-surged, 0)
	return append(createOn, candidates[:min(budget, len(candidates))]...), remove
}

func (s *dsSync) newPod(nodeName string) *corev1.Pod {
	pod := util.PodFromTemplate(&s.ds.Spec.Template, s.ds, dsGVK, "", s.ds.Name+"-")
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[util.ControllerRevisionHashLabel] = s.hash
	pod.Labels[PodTemplateGenerationLabel] = strconv.FormatInt(s.ds.Generation, 10)
	pod.Spec.Tolerations = withDaemonTolerations(&pod.Spec)
	pod.Spec.Affinity = pinToNode(pod.Spec.Affinity, nodeName)
	return pod
}

// apply issues the creations and deletions under expectations.
func (s *dsSync) apply(ctx context.Context, createOn []string, remove []*corev1.Pod) error {
	if len(createOn) == 0 && len(remove) == 0 {
		return nil
	}
	uids := make([]types.UID, len(remove))
	for i, p := range remove {
		uids[i] = p.UID
	}
	s.c.expectations.Expect(s.key, len(createOn), uids)
	var mu sync.Mutex
	next := 0
	created, createErr := util.SlowStartBatch(len(createOn), func() error {
		mu.Lock()
		node := createOn[next]
		next++
		mu.Unlock()
		name, err := util.CreatePod(ctx, s.c.client, s.newPod(node))
		if err != nil {
			s.c.recorder.Eventf(s.ds, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
			return err
		}
		s.c.recorder.Eventf(s.ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %s", name)
		return nil
	})
	for range len(createOn) - created {
		s.c.expectations.CreationObserved(s.key)
	}
	errs := []error{createErr}
	for _, p := range remove {
		err := s.c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil {
			s.c.expectations.DeletionObserved(s.key, p.UID)
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		s.c.recorder.Eventf(s.ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %s", p.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("daemon set %s: %w", s.key, err)
	}
	return nil
}

func (s *dsSync) updateStatus(ctx context.Context, cached *appsv1.DaemonSet) error {
	st := appsv1.DaemonSetStatus{ObservedGeneration: s.ds.Generation, CollisionCount: s.ds.Status.CollisionCount,
		Conditions: s.ds.Status.Conditions}
	requeue := time.Duration(0)
	for _, node := range s.nodes {
		shouldRun, _ := s.placement(node)
		live := livePods(s.nodeToPods[node.Name])
		scheduled := len(live) > 0
		switch {
		case shouldRun:
			st.DesiredNumberScheduled++
		case scheduled:
			st.NumberMisscheduled++
		}
		if !shouldRun || !scheduled {
			continue
		}
		st.CurrentNumberScheduled++
		oldest := live[0]
		if util.IsPodReady(oldest) {
			st.NumberReady++
			if s.available(oldest) {
				st.NumberAvailable++
			} else if d := util.AvailableAfter(oldest, s.ds.Spec.MinReadySeconds, s.now); d > 0 && (requeue == 0 || d < requeue) {
				requeue = d
			}
		}
		if oldest.Labels[util.ControllerRevisionHashLabel] == s.hash {
			st.UpdatedNumberScheduled++
		}
	}
	st.NumberUnavailable = max(st.DesiredNumberScheduled-st.NumberAvailable, 0)
	if requeue > 0 {
		s.c.queue.AddAfter(s.key, requeue)
	}
	if apiequality.Semantic.DeepEqual(st, cached.Status) {
		return nil
	}
	ds := cached.DeepCopy()
	ds.Status = st
	_, err := s.c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{})
	return err
}
