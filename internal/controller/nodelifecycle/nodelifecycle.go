// Package nodelifecycle watches node heartbeats (the node's Lease in kube-node-lease
// and its Ready condition). A node silent for longer than the grace period has all its
// conditions set Unknown and gets the node.kubernetes.io/unreachable taints (a node
// reporting Ready=False gets node.kubernetes.io/not-ready); the taints go once it is
// Ready again. Pods on an unreachable node are marked not Ready, and pods on a node
// with NoExecute taints are deleted once their tolerations run out.
package nodelifecycle

import (
	"context"
	"encoding/json"
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
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name is the controller's name in --controllers.
const Name = "node-lifecycle"

const (
	leaseNamespace = corev1.NamespaceNodeLease
	// monitorPeriod is how often every node's heartbeat is checked, as upstream.
	monitorPeriod = 5 * time.Second
	podsByNode    = "nodelifecycle.spec.nodeName"
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
	now         func() time.Time

	// heartbeats remembers, per node, the last heartbeat seen and when this process saw
	// it change; comparing our own clock readings avoids trusting the kubelet's clock.
	// After a restart every node gets a fresh grace period, as upstream.
	mu         sync.Mutex
	heartbeats map[string]heartbeat
}

type heartbeat struct {
	signature  string
	observedAt time.Time
}

// New registers the controller's handlers and its pods-by-node index.
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, leases coordinationinformers.LeaseInformer,
	pods coreinformers.PodInformer, gracePeriod time.Duration) (*Controller, error) {
	if err := pods.Informer().AddIndexers(cache.Indexers{podsByNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("pod index: %w", err)
	}
	c := &Controller{
		client:   client,
		nodes:    nodes.Lister(),
		leases:   leases.Lister(),
		podIndex: pods.Informer().GetIndexer(),
		synced:   []cache.InformerSynced{nodes.Informer().HasSynced, leases.Informer().HasSynced, pods.Informer().HasSynced},
		queue:    util.NewQueue(Name), gracePeriod: gracePeriod, now: time.Now,
		heartbeats: map[string]heartbeat{},
	}
	nodes.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	leases.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, cur any) {
			if l, ok := cur.(*coordinationv1.Lease); ok && l.Namespace == leaseNamespace {
				c.queue.Add(l.Name)
			}
		},
	})
	// A pod landing on a node with NoExecute taints must be checked for eviction.
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePodNode,
		UpdateFunc: func(_, cur any) { c.enqueuePodNode(cur) },
	})
	return c, nil
}

func (c *Controller) enqueuePodNode(obj any) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		c.queue.Add(p.Spec.NodeName)
	}
}

// Run checks every node each monitorPeriod, and on events, until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	go wait.UntilWithContext(ctx, func(context.Context) {
		nodes, _ := c.nodes.List(labels.Everything())
		for _, n := range nodes {
			c.queue.Add(n.Name)
		}
	}, monitorPeriod)
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced...)
}

// sync brings one node's conditions, taints and pods in line with its heartbeat.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.heartbeats, name)
		c.mu.Unlock()
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
	if taints, changed := wantTaints(node, ready, now); ready != "" && changed {
		updated := node.DeepCopy()
		updated.Spec.Taints = taints
		if node, err = c.client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("taint node %s: %w", name, err)
		}
		slog.InfoContext(ctx, "node taints updated", "node", name, "ready", ready)
	}
	pods, err := c.podIndex.ByIndex(podsByNode, name)
	if err != nil {
		return err
	}
	if ready == corev1.ConditionUnknown {
		if err := c.markPodsNotReady(ctx, pods, now); err != nil {
			return err
		}
	}
	return c.evict(ctx, node, pods, now)
}

// silentSince reports whether the node's heartbeat has not changed for longer than
// the grace period, as seen by this process.
func (c *Controller) silentSince(node *corev1.Node, now time.Time) bool {
	sig := ""
	if lease, err := c.leases.Leases(leaseNamespace).Get(node.Name); err == nil && lease.Spec.RenewTime != nil {
		sig = lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			sig += "|" + cond.LastHeartbeatTime.UTC().Format(time.RFC3339Nano)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hb, seen := c.heartbeats[node.Name]
	if !seen || hb.signature != sig {
		c.heartbeats[node.Name] = heartbeat{signature: sig, observedAt: now}
		return false
	}
	return now.Sub(hb.observedAt) > c.gracePeriod
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
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("mark pod %s/%s not ready: %w", pod.Namespace, pod.Name, err)
		}
	}
	return nil
}

// evict deletes the pods whose tolerations of the node's NoExecute taints have run out,
// and asks to be called again when the next one will.
func (c *Controller) evict(ctx context.Context, node *corev1.Node, pods []any, now time.Time) error {
	var next time.Duration
	for _, obj := range pods {
		pod := obj.(*corev1.Pod)
		if pod.DeletionTimestamp != nil || util.IsPodTerminal(pod) {
			continue
		}
		at, due := evictionTime(pod, node.Spec.Taints, now)
		if !due {
			continue
		}
		if wait := at.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		if err := c.deletePod(ctx, pod, now); err != nil {
			return err
		}
	}
	if next > 0 {
		return util.RequeueAfter(next, "a pod's toleration of a NoExecute taint runs out later")
	}
	return nil
}

func (c *Controller) deletePod(ctx context.Context, pod *corev1.Pod, now time.Time) error {
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager",
		Message: "Taint manager: deleting due to NoExecute taint", LastTransitionTime: metav1Time(now),
	}}}})
	if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		slog.WarnContext(ctx, "cannot mark pod as disrupted", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	slog.InfoContext(ctx, "evicted pod from tainted node", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	return nil
}
