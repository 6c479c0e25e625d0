// Package nodelifecycle watches node heartbeats (the node's Lease in kube-node-lease
// and its Ready condition). A node silent for longer than the grace period has all its
// conditions set Unknown and gets the node.kubernetes.io/unreachable taints (a node
// reporting Ready=False gets node.kubernetes.io/not-ready); the taints go once it is
// Ready again. A node under memory, disk or PID pressure, without its network, or
// cordoned (spec.unschedulable) gets the NoSchedule taint that says so while it lasts,
// as upstream's TaintNodesByCondition. Pods on an unreachable node are marked not
// Ready. TaintEviction, a controller of its own as upstream's taint-eviction-controller,
// deletes pods from nodes with NoExecute taints once their tolerations run out.
//
// NoExecute taints are paced zone by zone (EvictionOptions): a partially disrupted
// zone slows down or stops, and when no node in the cluster is Ready at all the
// controller blames its own connectivity and withholds (and withdraws) every NoExecute
// taint, as upstream does. It records the upstream Events: RegisteredNode,
// RemovingNode and NodeNotReady on nodes, NodeNotReady on pods (TaintEviction records
// TaintManagerEviction).
package nodelifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "node-lifecycle"

const (
	leaseNamespace = corev1.NamespaceNodeLease
	// monitorPeriod is how often every node's heartbeat is checked, as upstream.
	monitorPeriod = 5 * time.Second
	podsByNode    = "nodelifecycle.spec.nodeName"
	// zoneViewMaxAge is how long one count of Ready nodes per zone serves the syncs
	// that follow it (a monitor pass syncs every node within moments).
	zoneViewMaxAge = time.Second
)

// conditionsSetUnknown are the conditions a silent node can no longer vouch for.
func conditionsSetUnknown() []corev1.NodeConditionType {
	return []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}
}

// Controller watches node health; its queue holds node names.
type Controller struct {
	client      kubernetes.Interface
	nodes       corelisters.NodeLister
	leases      coordinationlisters.LeaseLister
	podIndex    cache.Indexer
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	gracePeriod time.Duration
	eviction    EvictionOptions
	now         func() time.Time

	// events sends what recorder records (source node-controller); tests swap in a
	// fake recorder.
	events   *util.Events
	recorder record.EventRecorder

	// heartbeats remembers, per node, the last heartbeat seen and when this process saw
	// it change; comparing our own clock readings avoids trusting the kubelet's clock.
	// After a restart every node gets a fresh grace period, as upstream.
	mu         sync.Mutex
	heartbeats map[string]heartbeat
	// zones caches the last count of Ready nodes per zone; nextTaint is, per zone, the
	// earliest time the next node may get a new NoExecute taint; disrupted remembers
	// whether the whole cluster was last seen fully disrupted (to log the transitions).
	zones     zoneView
	nextTaint map[string]time.Time
	disrupted bool
}

type heartbeat struct {
	signature  string
	observedAt time.Time
	uid        types.UID
	ready      corev1.ConditionStatus
}

// New registers the controller's handlers and its pods-by-node index.
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, leases coordinationinformers.LeaseInformer,
	pods coreinformers.PodInformer, gracePeriod time.Duration, eviction EvictionOptions) (*Controller, error) {
	if err := indexPodsByNode(pods); err != nil {
		return nil, err
	}
	c := &Controller{
		client:   client,
		nodes:    nodes.Lister(),
		leases:   leases.Lister(),
		podIndex: pods.Informer().GetIndexer(),
		synced:   []cache.InformerSynced{nodes.Informer().HasSynced, leases.Informer().HasSynced, pods.Informer().HasSynced},
		queue:    util.NewQueue("node_lifecycle_controller"), gracePeriod: gracePeriod, eviction: eviction.withDefaults(), now: time.Now,
		heartbeats: map[string]heartbeat{}, nextTaint: map[string]time.Time{},
		events: util.NewEvents(client, "node-controller"),
	}
	c.recorder = c.events
	nodes.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	leases.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, cur any) {
			if l, ok := cur.(*coordinationv1.Lease); ok && l.Namespace == leaseNamespace {
				c.queue.Add(l.Name)
			}
		},
	})
	return c, nil
}

// indexPodsByNode adds the pods-by-node index both controllers of this package read,
// once.
func indexPodsByNode(pods coreinformers.PodInformer) error {
	if _, ok := pods.Informer().GetIndexer().GetIndexers()[podsByNode]; ok {
		return nil
	}
	err := pods.Informer().AddIndexers(cache.Indexers{podsByNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("pod index: %w", err)
	}
	return nil
}

// Run checks every node each monitorPeriod, and on events, until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	go wait.UntilWithContext(ctx, func(context.Context) {
		nodes, _ := c.nodes.List(labels.Everything())
		for _, n := range nodes {
			c.queue.Add(n.Name)
		}
	}, monitorPeriod)
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

// sync brings one node's conditions and taints in line with its heartbeat, and marks
// the pods of an unreachable node not Ready.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	now := c.now()
	if c.silentSince(node, now) {
		if node, err = c.markUnknown(ctx, node, now); err != nil {
			return err
		}
	}
	ready := readyStatus(node)
	c.noteReadiness(node, ready)
	noExecute, retry := c.mayTaintNoExecute(ctx, node, ready, now)
	taints, readinessChanged := node.Spec.Taints, false
	if ready != "" {
		taints, readinessChanged = wantTaints(node, ready, now, noExecute)
	}
	taints, conditionsChanged := wantConditionTaints(node, taints, now)
	if readinessChanged || conditionsChanged {
		updated := node.DeepCopy()
		updated.Spec.Taints = taints
		if node, err = c.client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("taint node %s: %w", name, err)
		}
		slog.InfoContext(ctx, "node taints updated", "node", name, "ready", ready)
	}
	if ready == corev1.ConditionUnknown {
		pods, err := c.podIndex.ByIndex(podsByNode, name)
		if err != nil {
			return err
		}
		if err := c.markPodsNotReady(ctx, pods, now); err != nil {
			return err
		}
	}
	if retry > 0 {
		return util.RequeueAfter(retry, "a NoExecute taint was withheld by the zone's eviction rate")
	}
	return nil
}

// forget drops a deleted node, telling the user as upstream does.
func (c *Controller) forget(name string) {
	c.mu.Lock()
	hb, known := c.heartbeats[name]
	delete(c.heartbeats, name)
	c.mu.Unlock()
	if known {
		c.recordNode(name, hb.uid, corev1.EventTypeNormal, "RemovingNode", fmt.Sprintf("Removing Node %s from Controller", name))
	}
}

// recordNode records an Event about a node that may no longer be in the cache.
func (c *Controller) recordNode(name string, uid types.UID, eventType, reason, message string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
	c.recorder.Event(ref, eventType, reason, message)
}

// noteReadiness remembers the node's Ready status and reports a fall from Ready.
func (c *Controller) noteReadiness(node *corev1.Node, ready corev1.ConditionStatus) {
	c.mu.Lock()
	hb := c.heartbeats[node.Name]
	was := hb.ready
	hb.ready = ready
	c.heartbeats[node.Name] = hb
	c.mu.Unlock()
	if was == corev1.ConditionTrue && ready != corev1.ConditionTrue {
		c.recordNode(node.Name, node.UID, corev1.EventTypeNormal, "NodeNotReady", fmt.Sprintf("Node %s status is now: NodeNotReady", node.Name))
	}
}

// mayTaintNoExecute decides whether an unhealthy node may carry a NoExecute taint now,
// and if not, when to ask again. A node that already carries one keeps it (swapping
// unreachable for not-ready) unless the whole cluster is down; a new one waits for its
// zone's eviction rate.
func (c *Controller) mayTaintNoExecute(ctx context.Context, node *corev1.Node, ready corev1.ConditionStatus, now time.Time) (bool, time.Duration) {
	if ready == corev1.ConditionTrue || ready == "" {
		return true, 0
	}
	view := c.zoneView(now)
	all := view.allFullyDisrupted(c.eviction.UnhealthyZoneThreshold)
	c.mu.Lock()
	if all != c.disrupted {
		c.disrupted = all
		if all {
			slog.WarnContext(ctx, "no node in the cluster is Ready: withholding every NoExecute taint until one is")
		} else {
			slog.InfoContext(ctx, "some node is Ready again: NoExecute tainting resumes")
		}
	}
	c.mu.Unlock()
	if all {
		return false, monitorPeriod
	}
	if hasNoExecuteTaint(node) {
		return true, 0
	}
	zone := zoneKey(node)
	rate := c.eviction.evictionRate(view.counts[zone])
	if rate <= 0 {
		return false, monitorPeriod
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if next := c.nextTaint[zone]; now.Before(next) {
		return false, next.Sub(now)
	}
	c.nextTaint[zone] = now.Add(time.Duration(float64(time.Second) / rate))
	return true, 0
}

// zoneView counts Ready and not-Ready nodes per zone, reusing a count younger than
// zoneViewMaxAge. A node silent past the grace period counts as not Ready even before
// its conditions say so.
func (c *Controller) zoneView(now time.Time) zoneView {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zones.counts != nil && !now.Before(c.zones.at) && now.Sub(c.zones.at) < zoneViewMaxAge {
		return c.zones
	}
	nodes, _ := c.nodes.List(labels.Everything())
	counts := map[string]zoneCount{}
	for _, n := range nodes {
		z := counts[zoneKey(n)]
		if readyStatus(n) == corev1.ConditionTrue && !c.silentLocked(n, now) {
			z.ready++
		} else {
			z.notReady++
		}
		counts[zoneKey(n)] = z
	}
	c.zones = zoneView{counts: counts, at: now}
	return c.zones
}

// silentSince reports whether the node's heartbeat has not changed for longer than
// the grace period, as seen by this process.
// The first time a node is seen it is announced with a RegisteredNode Event.
func (c *Controller) silentSince(node *corev1.Node, now time.Time) bool {
	sig := c.heartbeatSignature(node)
	c.mu.Lock()
	hb, seen := c.heartbeats[node.Name]
	if !seen || hb.signature != sig {
		hb.signature, hb.observedAt, hb.uid = sig, now, node.UID
		c.heartbeats[node.Name] = hb
	}
	silent := seen && now.Sub(hb.observedAt) > c.gracePeriod
	c.mu.Unlock()
	if !seen {
		c.recordNode(node.Name, node.UID, corev1.EventTypeNormal, "RegisteredNode", fmt.Sprintf("Registered Node %s in Controller", node.Name))
	}
	return silent
}

// silentLocked is silentSince without recording anything; c.mu must be held.
func (c *Controller) silentLocked(node *corev1.Node, now time.Time) bool {
	hb, seen := c.heartbeats[node.Name]
	return seen && hb.signature == c.heartbeatSignature(node) && now.Sub(hb.observedAt) > c.gracePeriod
}

// heartbeatSignature sums up the node's heartbeats: its Lease's renew time and its
// Ready condition's heartbeat time.
func (c *Controller) heartbeatSignature(node *corev1.Node) string {
	sig := ""
	if lease, err := c.leases.Leases(leaseNamespace).Get(node.Name); err == nil && lease.Spec.RenewTime != nil {
		sig = lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			sig += "|" + cond.LastHeartbeatTime.UTC().Format(time.RFC3339Nano)
		}
	}
	return sig
}

func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return "" // never reported: too early to judge
}

// markUnknown sets every kubelet-reported condition to Unknown, as upstream does for
// a node that stopped posting status.
func (c *Controller) markUnknown(ctx context.Context, node *corev1.Node, now time.Time) (*corev1.Node, error) {
	updated := node.DeepCopy()
	changed := false
	for _, typ := range conditionsSetUnknown() {
		i := slices.IndexFunc(updated.Status.Conditions, func(cond corev1.NodeCondition) bool { return cond.Type == typ })
		if i < 0 {
			updated.Status.Conditions = append(updated.Status.Conditions, corev1.NodeCondition{
				Type: typ, Status: corev1.ConditionUnknown, Reason: "NodeStatusNeverUpdated",
				Message: "Kubelet never posted node status.", LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: metav1Time(now),
			})
			changed = true
			continue
		}
		cond := &updated.Status.Conditions[i]
		if cond.Status == corev1.ConditionUnknown {
			continue
		}
		cond.Status, cond.Reason, cond.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
		cond.LastTransitionTime = metav1Time(now)
		changed = true
	}
	if !changed {
		return node, nil
	}
	out, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("mark node %s unknown: %w", node.Name, err)
	}
	slog.WarnContext(ctx, "node stopped posting status; marked Unknown", "node", node.Name)
	return out, nil
}

func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }

// markPodsNotReady flips the Ready condition of the node's pods to False: nobody can
// vouch for them while their kubelet is unreachable.
func (c *Controller) markPodsNotReady(ctx context.Context, pods []any, now time.Time) error {
	for _, obj := range pods {
		pod := obj.(*corev1.Pod)
		if util.IsPodTerminal(pod) {
			continue
		}
		updated := pod.DeepCopy()
		changed := false
		for i := range updated.Status.Conditions {
			cond := &updated.Status.Conditions[i]
			if cond.Type == corev1.PodReady && cond.Status != corev1.ConditionFalse {
				cond.Status, cond.LastTransitionTime = corev1.ConditionFalse, metav1Time(now)
				changed = true
			}
		}
		if !changed {
			continue
		}
		_, err := c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("mark pod %s/%s not ready: %w", pod.Namespace, pod.Name, err)
		}
		c.recorder.Event(pod, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return nil
}
