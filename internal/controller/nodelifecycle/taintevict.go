package nodelifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// TaintEvictionName names the taint eviction controller in its logs.
const TaintEvictionName = "taint-eviction"

// TaintEviction deletes the pods of a node with NoExecute taints they do not tolerate,
// or tolerate only for tolerationSeconds, once that time has run out; as upstream's
// taint-eviction-controller it records TaintManagerEviction on each pod. Its queue
// holds node names.
type TaintEviction struct {
	client   kubernetes.Interface
	nodes    corelisters.NodeLister
	podIndex cache.Indexer
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	now      func() time.Time
	events   *util.Events
	recorder record.EventRecorder
}

// NewTaintEviction registers the controller's handlers: a node's taints changing, or a
// pod landing on a node, brings the node up for a look.
func NewTaintEviction(client kubernetes.Interface, nodes coreinformers.NodeInformer, pods coreinformers.PodInformer) (*TaintEviction, error) {
	if err := indexPodsByNode(pods); err != nil {
		return nil, err
	}
	c := &TaintEviction{
		client:   client,
		nodes:    nodes.Lister(),
		podIndex: pods.Informer().GetIndexer(),
		synced:   []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced},
		queue:    util.NewQueue("noexec_taint_node"),
		now:      time.Now,
		events:   util.NewEvents(client, "taint-eviction-controller"),
	}
	c.recorder = c.events
	nodes.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	enqueuePodNode := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			c.queue.Add(p.Spec.NodeName)
		}
	}
	pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePodNode,
		UpdateFunc: func(_, cur any) { enqueuePodNode(cur) },
	})
	return c, nil
}

// Run evicts until ctx ends.
func (c *TaintEviction) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	util.RunKeyWorkers(ctx, TaintEvictionName, c.queue, workers, c.sync, c.synced...)
}

// sync evicts the node's pods whose time is up, and asks to look again when the next
// one's will be.
func (c *TaintEviction) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pods, err := c.podIndex.ByIndex(podsByNode, name)
	if err != nil {
		return err
	}
	return c.evict(ctx, node, pods, c.now())
}

// evict deletes the pods whose tolerations of the node's NoExecute taints have run out,
// and asks to be called again when the next one will.
func (c *TaintEviction) evict(ctx context.Context, node *corev1.Node, pods []any, now time.Time) error {
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

func (c *TaintEviction) deletePod(ctx context.Context, pod *corev1.Pod, now time.Time) error {
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager",
		Message: "Taint manager: deleting due to NoExecute taint", LastTransitionTime: metav1Time(now),
	}}}})
	if _, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		slog.WarnContext(ctx, "cannot mark pod as disrupted", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
	c.recorder.Eventf(pod, corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", pod.Namespace, pod.Name)
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	slog.InfoContext(ctx, "evicted pod from tainted node", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	return nil
}
