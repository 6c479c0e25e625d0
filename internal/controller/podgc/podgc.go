// Package podgc deletes pods nobody else will: terminated pods beyond a threshold
// (oldest first), terminating pods on a node that is not Ready and that an operator
// has tainted node.kubernetes.io/out-of-service (non-graceful node shutdown), pods
// bound to nodes that no longer exist, and terminating pods that were never
// scheduled, so no kubelet will ever finish them.
package podgc

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "pod-garbage-collector"

// checkPeriod is how often the whole pod list is examined, as upstream.
const checkPeriod = 20 * time.Second

// Controller collects pods; it has no queue because every pass looks at all pods.
type Controller struct {
	client    kubernetes.Interface
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	synced    []cache.InformerSynced
	threshold int
}

// New builds the collector. threshold <= 0 keeps every terminated pod.
func New(client kubernetes.Interface, pods coreinformers.PodInformer, nodes coreinformers.NodeInformer, threshold int) *Controller {
	return &Controller{
		client:    client,
		pods:      pods.Lister(),
		nodes:     nodes.Lister(),
		synced:    []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced},
		threshold: threshold,
	}
}

// Run collects every checkPeriod until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	if !cache.WaitForNamedCacheSync(Name, ctx.Done(), c.synced...) {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.sync(ctx); err != nil {
			slog.WarnContext(ctx, "pod garbage collection failed; will retry", "err", err)
		}
	}, checkPeriod)
}

// sync is one level-based pass over all pods.
func (c *Controller) sync(ctx context.Context) error {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	c.collectTerminated(ctx, pods)
	c.collectOutOfService(ctx, pods)
	c.collectOrphaned(ctx, pods)
	c.collectUnscheduledTerminating(ctx, pods)
	return nil
}

func (c *Controller) collectTerminated(ctx context.Context, pods []*corev1.Pod) {
	if c.threshold <= 0 {
		return
	}
	var terminated []*corev1.Pod
	for _, p := range pods {
		if util.IsPodTerminal(p) {
			terminated = append(terminated, p)
		}
	}
	excess := len(terminated) - c.threshold
	if excess <= 0 {
		return
	}
	sort.Slice(terminated, func(i, j int) bool {
		ti, tj := terminated[i].CreationTimestamp, terminated[j].CreationTimestamp
		if ti.Equal(&tj) {
			return terminated[i].Namespace+"/"+terminated[i].Name < terminated[j].Namespace+"/"+terminated[j].Name
		}
		return ti.Before(&tj)
	})
	for _, p := range terminated[:excess] {
		c.delete(ctx, p, false, "")
	}
}

// collectOrphaned deletes pods bound to a node the API no longer has. The node lister
// may lag behind, so a missing node is confirmed with a live GET first.
func (c *Controller) collectOrphaned(ctx context.Context, pods []*corev1.Pod) {
	checked := map[string]bool{} // node name -> exists
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		if _, err := c.nodes.Get(p.Spec.NodeName); err == nil {
			continue
		}
		exists, seen := checked[p.Spec.NodeName]
		if !seen {
			_, err := c.client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			exists = !apierrors.IsNotFound(err) // on other errors, assume it exists
			checked[p.Spec.NodeName] = exists
		}
		if !exists {
			c.delete(ctx, p, true, "PodGC: node no longer exists")
		}
	}
}

func (c *Controller) collectUnscheduledTerminating(ctx context.Context, pods []*corev1.Pod) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil && p.Spec.NodeName == "" {
			c.delete(ctx, p, true, "PodGC: unscheduled pod is terminating")
		}
	}
}

// collectOutOfService force-deletes terminating pods whose node is not Ready and
// carries the out-of-service taint: the operator says the node is gone for good, so
// its kubelet will never confirm these pods' end and their volumes can move.
func (c *Controller) collectOutOfService(ctx context.Context, pods []*corev1.Pod) {
	for _, p := range pods {
		if p.DeletionTimestamp == nil || p.Spec.NodeName == "" {
			continue
		}
		node, err := c.nodes.Get(p.Spec.NodeName)
		if err != nil || nodeReady(node) {
			continue
		}
		if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }) {
			c.delete(ctx, p, true, "")
		}
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// delete marks a still-running pod Failed when fail is set, with a DisruptionTarget
// condition saying why when why is set, then deletes it with no grace period, as
// upstream's podgc does.
func (c *Controller) delete(ctx context.Context, p *corev1.Pod, fail bool, why string) {
	log := slog.With("pod", p.Namespace+"/"+p.Name)
	if fail && !util.IsPodTerminal(p) {
		status := map[string]any{"phase": corev1.PodFailed}
		if why != "" {
			status["conditions"] = []corev1.PodCondition{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC",
				Message: why, LastTransitionTime: metav1.Now(),
			}}
		}
		patch, _ := json.Marshal(map[string]any{"status": status})
		_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			log.WarnContext(ctx, "cannot mark pod failed before deleting it", "err", err)
		}
	}
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, *metav1.NewDeleteOptions(0))
	if err != nil && !apierrors.IsNotFound(err) {
		log.WarnContext(ctx, "cannot delete pod", "err", err)
		return
	}
	log.InfoContext(ctx, "garbage-collected pod", "reason", why)
}
