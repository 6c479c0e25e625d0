// Package nodelifecycle is the cloud-controller-manager's node-lifecycle controller
// (upstream's cloud-node-lifecycle-controller): every monitor period it asks the
// provider about each node that is not Ready, deletes the Node of an instance that no
// longer exists, and taints the Node of one that is shut down with
// node.cloudprovider.kubernetes.io/shutdown:NoSchedule, which it removes once the node
// is Ready again.
package nodelifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"mizzen/internal/cloud"
	"mizzen/internal/controller/util"
)

// Component is the source of the controller's events, as upstream's.
const Component = "cloud-node-lifecycle-controller"

// ShutdownTaint is the taint of a node whose instance is shut down.
var ShutdownTaint = v1.Taint{Key: cloud.TaintNodeShutdown, Effect: v1.TaintEffectNoSchedule}

// Controller deletes the Nodes of gone instances and taints those of shut down ones.
type Controller struct {
	client    kubernetes.Interface
	instances cloud.InstancesV2
	nodes     corelisters.NodeLister
	synced    cache.InformerSynced
	// Events records the DeletingNode events; tests swap in a FakeRecorder.
	Events record.EventRecorder
	events *util.Events
	// MonitorPeriod is how often every node is checked (upstream: 5 s).
	MonitorPeriod time.Duration
	Log           *slog.Logger
}

// New returns the controller, or an error if the provider knows no instances.
func New(client kubernetes.Interface, provider cloud.Interface, nodes coreinformers.NodeInformer, period time.Duration) (*Controller, error) {
	instances, ok := provider.InstancesV2()
	if !ok {
		return nil, fmt.Errorf("cloud provider %q does not support instances", provider.ProviderName())
	}
	events := util.NewEvents(client, Component)
	return &Controller{client: client, instances: instances, nodes: nodes.Lister(), synced: nodes.Informer().HasSynced,
		Events: events, events: events, MonitorPeriod: period, Log: slog.Default()}, nil
}

// Run monitors the nodes until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.events.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	wait.UntilWithContext(ctx, c.MonitorNodes, c.MonitorPeriod)
}

// MonitorNodes checks every node once.
func (c *Controller) MonitorNodes(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, node := range nodes {
		if _, excluded := node.Labels[cloud.LabelNodeLifecycleExclude]; excluded {
			continue
		}
		if ready(node) {
			if err := c.setShutdownTaint(ctx, node, false); err != nil {
				c.Log.Error("removing the shutdown taint", "node", node.Name, "err", err)
			}
			continue
		}
		exists, err := c.instances.InstanceExists(ctx, node)
		if err != nil {
			c.Log.Error("checking whether the node's instance exists", "node", node.Name, "err", err)
			continue
		}
		if !exists {
			ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
			c.Events.Eventf(ref, v1.EventTypeNormal, "DeletingNode", "Deleting node %s because it does not exist in the cloud provider", node.Name)
			if err := c.client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				c.Events.Eventf(ref, v1.EventTypeWarning, "DeletingNodeFailed", "Failed deleting node %s: %v", node.Name, err)
			}
			continue
		}
		shutdown, err := c.instances.InstanceShutdown(ctx, node)
		if err != nil {
			c.Log.Error("checking whether the node's instance is shut down", "node", node.Name, "err", err)
			continue
		}
		if shutdown {
			if err := c.setShutdownTaint(ctx, node, true); err != nil {
				c.Log.Error("applying the shutdown taint", "node", node.Name, "err", err)
			}
		}
	}
}

// ready: the node's Ready condition is True (a node without one counts as Unknown).
func ready(n *v1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

// setShutdownTaint adds or removes the shutdown taint with a patch that carries the
// resourceVersion, so that taints written meanwhile by others are not lost.
func (c *Controller) setShutdownTaint(ctx context.Context, node *v1.Node, on bool) error {
	has := slices.ContainsFunc(node.Spec.Taints, func(t v1.Taint) bool { return t.Key == ShutdownTaint.Key && t.Effect == ShutdownTaint.Effect })
	if has == on {
		return nil
	}
	taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t v1.Taint) bool { return t.Key == ShutdownTaint.Key && t.Effect == ShutdownTaint.Effect })
	if on {
		t := ShutdownTaint
		now := metav1.Now()
		t.TimeAdded = &now
		taints = append(taints, t)
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	_, err := c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
