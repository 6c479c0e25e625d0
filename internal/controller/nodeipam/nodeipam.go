// Package nodeipam gives every node a pod CIDR (spec.podCIDR and spec.podCIDRs) out of
// the cluster CIDR, never the same one to two nodes. Allocations are rebuilt from the
// nodes themselves at start, so nothing is kept outside the API. A node that cannot
// get one is told with a CIDRNotAvailable or CIDRAssignmentFailed Event, as upstream.
package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs (its --controllers names,
// upstream's, are given in internal/controllermanager).
const Name = "node-ipam"

// Controller allocates pod CIDRs; its queue holds node names.
type Controller struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	cidrs  *allocator

	events   *util.Events
	recorder record.EventRecorder
}

// New registers the controller on the node informer. clusterCIDR is one IPv4 or IPv6
// range; each node gets a /maskSize of it.
func New(client kubernetes.Interface, nodes coreinformers.NodeInformer, clusterCIDR string, maskSize int) (*Controller, error) {
	cidrs, err := newAllocator(clusterCIDR, maskSize)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		client: client,
		nodes:  nodes.Lister(),
		synced: nodes.Informer().HasSynced,
		queue:  util.NewQueue(Name),
		cidrs:  cidrs,
		events: util.NewEvents(client, "cidrAllocator"),
	}
	c.recorder = c.events
	nodes.Informer().AddEventHandler(util.EnqueueKeyHandler(c.queue))
	return c, nil
}

// Run rebuilds the allocations from the nodes, then processes nodes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	if !cache.WaitForNamedCacheSync(Name, ctx.Done(), c.synced) {
		return
	}
	if err := c.rebuild(); err != nil {
		slog.ErrorContext(ctx, "node-ipam cannot list nodes", "err", err)
		return
	}
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced)
}

// rebuild occupies every podCIDR nodes already hold, before anything new is handed out.
func (c *Controller) rebuild() error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, n := range nodes {
		for _, cidr := range podCIDRs(n.Spec.PodCIDR, n.Spec.PodCIDRs) {
			if !c.cidrs.occupy(n.Name, cidr) {
				slog.Warn("node holds a pod CIDR outside the cluster CIDR or another node's", "node", n.Name, "podCIDR", cidr)
			}
		}
	}
	return nil
}

func podCIDRs(single string, list []string) []string {
	if len(list) > 0 {
		return list
	}
	if single != "" {
		return []string{single}
	}
	return nil
}

// sync gives a node without a pod CIDR a free one, and frees the CIDR of a deleted node.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.cidrs.release(name)
		return nil
	}
	if err != nil {
		return err
	}
	if have := podCIDRs(node.Spec.PodCIDR, node.Spec.PodCIDRs); len(have) > 0 {
		for _, cidr := range have {
			c.cidrs.occupy(name, cidr)
		}
		return nil
	}
	p, err := c.cidrs.allocate(name)
	if err != nil {
		c.recordStatus(node, "CIDRNotAvailable")
		return err
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{
		"podCIDR": p.String(), "podCIDRs": []string{p.String()},
	}})
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		c.cidrs.release(name)
		return nil
	}
	if err != nil {
		c.cidrs.release(name)
		c.recordStatus(node, "CIDRAssignmentFailed")
		return fmt.Errorf("assign pod CIDR %s to node %s: %w", p, name, err)
	}
	slog.InfoContext(ctx, "assigned pod CIDR", "node", name, "podCIDR", p.String())
	return nil
}

// recordStatus records a node status change the way upstream words it.
func (c *Controller) recordStatus(node *corev1.Node, status string) {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	c.recorder.Eventf(ref, corev1.EventTypeNormal, status, "Node %s status is now: %s", node.Name, status)
}
