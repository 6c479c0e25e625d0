// Package node is the cloud-controller-manager's node controller (upstream's
// cloud-node-controller): a Node registered by a kubelet with --cloud-provider
// external carries the taint node.cloudprovider.kubernetes.io/uninitialized until this
// controller has given it what the provider knows (spec.providerID, status.addresses,
// the zone, region and instance-type labels) and removed the taint. Initialized nodes
// get their addresses refreshed periodically, and their beta labels mirrored to the GA
// ones, as upstream.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
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
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/cloud"
	"mizzen/internal/controller/util"
)

// Component is the source of the controller's events, as upstream's.
const Component = "cloud-node-controller"

// Beta labels the controller sets beside the GA ones, as upstream.
const (
	labelBetaZone         = "failure-domain.beta.kubernetes.io/zone"
	labelBetaRegion       = "failure-domain.beta.kubernetes.io/region"
	labelBetaInstanceType = "beta.kubernetes.io/instance-type"
)

// k8sNamespace matches label keys in the kubernetes.io and k8s.io namespaces, which a
// provider's extra labels may not use.
var k8sNamespace = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)

// Controller initializes and refreshes Nodes from the provider.
type Controller struct {
	client    kubernetes.Interface
	instances cloud.InstancesV2
	nodes     corelisters.NodeLister
	synced    cache.InformerSynced
	// Events records what `kubectl describe node` shows; tests swap in a FakeRecorder.
	Events record.EventRecorder
	events *util.Events
	queue  workqueue.TypedRateLimitingInterface[string]
	// StatusUpdateFrequency is how often initialized nodes' addresses are refreshed.
	StatusUpdateFrequency time.Duration
}

// New returns the controller, or an error if the provider knows no instances.
func New(client kubernetes.Interface, provider cloud.Interface, nodes coreinformers.NodeInformer, statusUpdateFrequency time.Duration) (*Controller, error) {
	instances, ok := provider.InstancesV2()
	if !ok {
		return nil, fmt.Errorf("cloud provider %q does not support instances", provider.ProviderName())
	}
	events := util.NewEvents(client, Component)
	c := &Controller{
		client: client, instances: instances, nodes: nodes.Lister(), synced: nodes.Informer().HasSynced,
		Events: events, events: events, queue: util.NewQueue("Nodes"),
		StatusUpdateFrequency: statusUpdateFrequency,
	}
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { util.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, obj any) { util.Enqueue(c.queue, obj) },
	})
	return c, nil
}

// Run initializes nodes with workers goroutines and refreshes addresses every
// StatusUpdateFrequency until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	if c.StatusUpdateFrequency > 0 {
		go func() {
			if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
				return
			}
			wait.UntilWithContext(ctx, c.UpdateNodeStatus, c.StatusUpdateFrequency)
		}()
	}
	util.RunKeyWorkers(ctx, "cloud-node-controller", c.queue, workers, c.Sync, c.synced)
}

func cloudTaint(n *v1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloud.TaintExternalCloudProvider })
}

// Sync initializes the node named key if it carries the uninitialized taint, else
// reconciles its beta and GA topology labels.
func (c *Controller) Sync(ctx context.Context, key string) error {
	node, err := c.nodes.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !cloudTaint(node) {
		return c.reconcileLabels(ctx, node)
	}
	if err := c.initialize(ctx, node); err != nil {
		c.Events.Eventf(node.DeepCopy(), v1.EventTypeWarning, "FailedToInitializeNode", "Failed to initialize node with cloud provider: %v", err)
		return err
	}
	return nil
}

func (c *Controller) initialize(ctx context.Context, node *v1.Node) error {
	meta, err := c.instances.InstanceMetadata(ctx, node)
	if err != nil {
		return fmt.Errorf("failed to get instance metadata for node %s: %v", node.Name, err)
	}
	if meta == nil {
		return nil // the provider has nothing to say yet
	}
	if meta.ProviderID == "" {
		if node.Spec.ProviderID == "" {
			return fmt.Errorf("cloud provider does not set node provider ID for node %s", node.Name)
		}
		meta.ProviderID = node.Spec.ProviderID
	}
	// The kubelet's --node-ip must be one of the provider's addresses before the node
	// is let in.
	if _, err := addressesFromNodeIP(node, meta.NodeAddresses); err != nil {
		return fmt.Errorf("provided node ip for node %q is not valid: %w", node.Name, err)
	}
	modify := func(n *v1.Node) {
		if n.Spec.ProviderID == "" {
			n.Spec.ProviderID = meta.ProviderID
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		set := func(value string, keys ...string) {
			if value == "" {
				return
			}
			for _, k := range keys {
				n.Labels[k] = value
			}
		}
		set(meta.InstanceType, v1.LabelInstanceTypeStable, labelBetaInstanceType)
		set(meta.Zone, v1.LabelTopologyZone, labelBetaZone)
		set(meta.Region, v1.LabelTopologyRegion, labelBetaRegion)
		for k, v := range meta.AdditionalLabels {
			if _, has := n.Labels[k]; !has && !k8sNamespace.MatchString(k) {
				n.Labels[k] = v
			}
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloud.TaintExternalCloudProvider })
	}
	var updated *v1.Node
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := c.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !cloudTaint(cur) {
			updated = cur
			return nil // initialized meanwhile
		}
		modify(cur)
		updated, err = c.client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	if err := c.updateAddresses(ctx, updated, meta); err != nil {
		return err
	}
	c.Events.Event(node.DeepCopy(), v1.EventTypeNormal, "Synced", "Node synced successfully")
	return nil
}

// UpdateNodeStatus refreshes the addresses of every initialized node.
func (c *Controller) UpdateNodeStatus(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		if cloudTaint(n) {
			continue // Sync initializes it
		}
		meta, err := c.instances.InstanceMetadata(ctx, n)
		if err != nil || meta == nil {
			continue
		}
		_ = c.updateAddresses(ctx, n.DeepCopy(), meta)
	}
}

// updateAddresses writes the provider's addresses, with the node's Hostname address
// kept when the provider gives none and the kubelet's --node-ip first.
func (c *Controller) updateAddresses(ctx context.Context, node *v1.Node, meta *cloud.InstanceMetadata) error {
	addrs := slices.Clone(meta.NodeAddresses)
	if len(addrs) == 0 {
		return nil
	}
	if !slices.ContainsFunc(addrs, func(a v1.NodeAddress) bool { return a.Type == v1.NodeHostName }) {
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeHostName {
				addrs = append(addrs, a)
			}
		}
	}
	addrs, err := addressesFromNodeIP(node, addrs)
	if err != nil {
		return err
	}
	if slices.Equal(addrs, node.Status.Addresses) {
		return nil
	}
	// A strategic merge patch would merge the list by type; the whole list is the
	// provider's, so a merge patch replaces it.
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"addresses": addrs}})
	_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// addressesFromNodeIP applies the kubelet's --node-ip (annotation
// alpha.kubernetes.io/provided-node-ip), as upstream: the address equal to it comes
// first and is the only one of its type; an IP the provider does not know is an error.
func addressesFromNodeIP(node *v1.Node, addrs []v1.NodeAddress) ([]v1.NodeAddress, error) {
	provided, ok := node.Annotations[cloud.AnnotationProvidedNodeIP]
	if !ok {
		return addrs, nil
	}
	ip, err := netip.ParseAddr(provided)
	if err != nil {
		return nil, fmt.Errorf("failed to parse node IP %q: %v", provided, err)
	}
	var match *v1.NodeAddress
	for i := range addrs {
		if a, err := netip.ParseAddr(addrs[i].Address); err == nil && a == ip {
			match = &addrs[i]
			break
		}
	}
	if match == nil {
		return nil, fmt.Errorf("failed to get node address from cloud provider that matches ip: %v", provided)
	}
	out := []v1.NodeAddress{*match}
	for _, a := range addrs {
		if a.Type != match.Type {
			out = append(out, a)
		}
	}
	return out, nil
}

// reconcileLabels mirrors the beta topology labels to the GA ones, as upstream.
func (c *Controller) reconcileLabels(ctx context.Context, node *v1.Node) error {
	want := map[string]string{}
	for beta, ga := range map[string]string{labelBetaZone: v1.LabelTopologyZone, labelBetaRegion: v1.LabelTopologyRegion, labelBetaInstanceType: v1.LabelInstanceTypeStable} {
		if v, ok := node.Labels[beta]; ok && node.Labels[ga] != v {
			want[ga] = v
		}
	}
	if len(want) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": want}})
	_, err := c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}
