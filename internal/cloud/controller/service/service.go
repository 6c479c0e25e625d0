// Package service is the cloud-controller-manager's service controller (upstream's
// service-lb-controller): Services of type LoadBalancer without a loadBalancerClass
// get a load balancer from the provider, status.loadBalancer.ingress from it, and the
// finalizer service.kubernetes.io/load-balancer-cleanup until it is deleted again;
// when the set of nodes changes, every load balancer is pointed at the new set. Events
// are worded as upstream's.
package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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

	"mizzen/internal/cloud"
	"mizzen/internal/controller/util"
)

// Component is the source of the controller's events, as upstream's.
const Component = "service-controller"

// toBeDeletedTaint is the cluster autoscaler's taint on nodes it is about to remove.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// nodeSyncKey is the one key of the node queue: any node change resyncs every load
// balancer's hosts.
const nodeSyncKey = "nodes"

// Controller keeps load balancers in step with Services and nodes.
type Controller struct {
	client      kubernetes.Interface
	balancer    cloud.LoadBalancer
	clusterName string
	services    corelisters.ServiceLister
	nodes       corelisters.NodeLister
	synced      []cache.InformerSynced
	// Events records what `kubectl describe service` shows; tests swap in a
	// record.FakeRecorder.
	Events record.EventRecorder
	events *util.Events

	queue     workqueue.TypedRateLimitingInterface[string]
	nodeQueue workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// lastHosts is, per Service key, the node set its load balancer was last pointed at.
	lastHosts map[string]string
}

// New returns the controller, or an error if the provider has no load balancers.
func New(client kubernetes.Interface, provider cloud.Interface, clusterName string,
	services coreinformers.ServiceInformer, nodes coreinformers.NodeInformer) (*Controller, error) {
	lb, ok := provider.LoadBalancer()
	if !ok {
		return nil, fmt.Errorf("the cloud provider %q does not support external load balancers", provider.ProviderName())
	}
	events := util.NewEvents(client, Component)
	c := &Controller{
		client: client, balancer: lb, clusterName: clusterName,
		services: services.Lister(), nodes: nodes.Lister(),
		synced: []cache.InformerSynced{services.Informer().HasSynced, nodes.Informer().HasSynced},
		Events: events, events: events,
		// Upstream retries a failed service after 5 s, backing off to 5 min.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "service"}),
		nodeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node"}),
		lastHosts: map[string]string{},
	}
	_, _ = services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc, ok := obj.(*v1.Service); ok && (wantsLoadBalancer(svc) || needsCleanup(svc)) {
				util.Enqueue(c.queue, obj)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Service)
			n, ok2 := cur.(*v1.Service)
			if ok1 && ok2 && (c.needsUpdate(o, n) || needsCleanup(n)) {
				util.Enqueue(c.queue, cur)
			}
		},
		// A deletion arrives first as an update setting deletionTimestamp, which the
		// finalizer holds until the load balancer is gone.
	})
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.nodeQueue.Add(nodeSyncKey) },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Node)
			n, ok2 := cur.(*v1.Node)
			if ok1 && ok2 && (eligible(o) != eligible(n) || !apiequality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses)) {
				c.nodeQueue.Add(nodeSyncKey)
			}
		},
		DeleteFunc: func(any) { c.nodeQueue.Add(nodeSyncKey) },
	})
	return c, nil
}

// Run processes Services with workers goroutines, and node changes with one, until
// ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.events.Start(ctx)
	go util.RunKeyWorkers(ctx, "service-lb-controller-nodes", c.nodeQueue, 1, func(ctx context.Context, _ string) error {
		return c.SyncNodes(ctx)
	}, c.synced...)
	util.RunKeyWorkers(ctx, "service-lb-controller", c.queue, workers, c.Sync, c.synced...)
}

// wantsLoadBalancer: a LoadBalancer Service with no loadBalancerClass is the default
// provider's; one with a class belongs to another implementation.
func wantsLoadBalancer(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

func hasFinalizer(svc *v1.Service) bool {
	return slices.Contains(svc.Finalizers, cloud.LoadBalancerCleanupFinalizer)
}

// needsCleanup: the Service holds the finalizer but is being deleted or no longer of
// type LoadBalancer.
func needsCleanup(svc *v1.Service) bool {
	return hasFinalizer(svc) && (svc.DeletionTimestamp != nil || svc.Spec.Type != v1.ServiceTypeLoadBalancer)
}

// needsUpdate: a change of what the load balancer is made of (not of its status,
// which this controller writes). The changes upstream reports get its events
// ("Type", "LoadbalancerIP", "ExternalTrafficPolicy", ...).
func (c *Controller) needsUpdate(old, cur *v1.Service) bool {
	if !wantsLoadBalancer(old) && !wantsLoadBalancer(cur) {
		return false
	}
	event := func(reason, format string, args ...any) {
		c.Events.Eventf(cur, v1.EventTypeNormal, reason, format, args...)
	}
	switch {
	case wantsLoadBalancer(old) != wantsLoadBalancer(cur):
		event("Type", "%v -> %v", old.Spec.Type, cur.Spec.Type)
	case !slices.Equal(old.Spec.LoadBalancerSourceRanges, cur.Spec.LoadBalancerSourceRanges):
		event("LoadBalancerSourceRanges", "%v -> %v", old.Spec.LoadBalancerSourceRanges, cur.Spec.LoadBalancerSourceRanges)
	case old.Spec.LoadBalancerIP != cur.Spec.LoadBalancerIP:
		event("LoadbalancerIP", "%v -> %v", old.Spec.LoadBalancerIP, cur.Spec.LoadBalancerIP)
	case len(old.Spec.ExternalIPs) != len(cur.Spec.ExternalIPs):
		event("ExternalIP", "Count: %v -> %v", len(old.Spec.ExternalIPs), len(cur.Spec.ExternalIPs))
	case old.UID != cur.UID:
		event("UID", "%v -> %v", old.UID, cur.UID)
	case old.Spec.ExternalTrafficPolicy != cur.Spec.ExternalTrafficPolicy:
		event("ExternalTrafficPolicy", "%v -> %v", old.Spec.ExternalTrafficPolicy, cur.Spec.ExternalTrafficPolicy)
	case old.Spec.HealthCheckNodePort != cur.Spec.HealthCheckNodePort:
		event("HealthCheckNodePort", "%v -> %v", old.Spec.HealthCheckNodePort, cur.Spec.HealthCheckNodePort)
	}
	return !apiequality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
		!apiequality.Semantic.DeepEqual(old.Annotations, cur.Annotations) || old.UID != cur.UID
}

// eligible is upstream's stable node set: nodes not being deleted, not excluded by
// label, not about to be removed by the autoscaler, and initialized by the provider.
func eligible(n *v1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	if _, excluded := n.Labels[cloud.LabelExcludeFromLoadBalancers]; excluded {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == toBeDeletedTaint || t.Key == cloud.TaintExternalCloudProvider {
			return false
		}
	}
	return true
}

func (c *Controller) eligibleNodes() ([]*v1.Node, error) {
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*v1.Node
	for _, n := range all {
		if eligible(n) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// hostsKey identifies a node set with the addresses the load balancers use.
func hostsKey(nodes []*v1.Node) string {
	var parts []string
	for _, n := range nodes {
		var addrs []string
		for _, a := range n.Status.Addresses {
			addrs = append(addrs, string(a.Type)+"="+a.Address)
		}
		parts = append(parts, n.Name+"["+strings.Join(addrs, ",")+"]")
	}
	return strings.Join(parts, " ")
}

// Sync reconciles the load balancer of the Service named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone without our finalizer: nothing was made for it, or it is cleaned up.
		c.forgetHosts(key)
		return nil
	}
	if err != nil {
		return err
	}
	svc = svc.DeepCopy()
	if err := c.syncLoadBalancer(ctx, svc, key); err != nil {
		c.Events.Eventf(svc, v1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
		return err
	}
	return nil
}

func (c *Controller) syncLoadBalancer(ctx context.Context, svc *v1.Service, key string) error {
	previous := svc.Status.LoadBalancer.DeepCopy()
	if !wantsLoadBalancer(svc) || needsCleanup(svc) {
		_, exists, err := c.balancer.GetLoadBalancer(ctx, c.clusterName, svc)
		if err != nil {
			return fmt.Errorf("failed to check if load balancer exists before cleanup: %v", err)
		}
		if exists {
			c.Events.Event(svc, v1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
			if err := c.balancer.EnsureLoadBalancerDeleted(ctx, c.clusterName, svc); err != nil && err != cloud.ImplementedElsewhere {
				return fmt.Errorf("failed to delete load balancer: %v", err)
			}
		}
		c.forgetHosts(key)
		if hasFinalizer(svc) {
			if err := c.setFinalizer(ctx, svc, false); err != nil {
				return fmt.Errorf("failed to remove load balancer cleanup finalizer: %v", err)
			}
			c.Events.Event(svc, v1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
		}
		if err := c.patchStatus(ctx, svc, previous, &v1.LoadBalancerStatus{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to update load balancer status: %v", err)
		}
		if exists {
			// An address or a port came free: Services still waiting for one may get it.
			c.retryPending(key)
		}
		return nil
	}
	c.Events.Event(svc, v1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	if !hasFinalizer(svc) {
		if err := c.setFinalizer(ctx, svc, true); err != nil {
			return fmt.Errorf("failed to add load balancer cleanup finalizer: %v", err)
		}
	}
	nodes, err := c.eligibleNodes()
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		c.Events.Event(svc, v1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
	}
	status, err := c.balancer.EnsureLoadBalancer(ctx, c.clusterName, svc, nodes)
	if err == cloud.ImplementedElsewhere {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to ensure load balancer: %v", err)
	}
	if status == nil {
		return fmt.Errorf("service status returned by EnsureLoadBalancer is nil")
	}
	c.setHosts(key, hostsKey(nodes))
	c.Events.Event(svc, v1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")
	if err := c.patchStatus(ctx, svc, previous, status); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to update load balancer status: %v", err)
	}
	return nil
}

// retryPending requeues the Services that want a load balancer and have no address
// yet, other than key.
func (c *Controller) retryPending(key string) {
	all, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, s := range all {
		if wantsLoadBalancer(s) && len(s.Status.LoadBalancer.Ingress) == 0 && serviceKey(s) != key {
			c.queue.Add(serviceKey(s))
		}
	}
}

func serviceKey(s *v1.Service) string { return s.Namespace + "/" + s.Name }

// setFinalizer adds or removes the cleanup finalizer with a merge patch that carries
// the resourceVersion, so a concurrent change of the list fails instead of being lost.
func (c *Controller) setFinalizer(ctx context.Context, svc *v1.Service, add bool) error {
	finalizers := slices.DeleteFunc(slices.Clone(svc.Finalizers), func(f string) bool { return f == cloud.LoadBalancerCleanupFinalizer })
	if add {
		finalizers = append(finalizers, cloud.LoadBalancerCleanupFinalizer)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": svc.ResourceVersion,
	}})
	updated, err := c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	svc.Finalizers, svc.ResourceVersion = updated.Finalizers, updated.ResourceVersion
	return nil
}

// patchStatus writes status.loadBalancer when it differs from previous.
func (c *Controller) patchStatus(ctx context.Context, svc *v1.Service, previous, status *v1.LoadBalancerStatus) error {
	if apiequality.Semantic.DeepEqual(previous, status) || (len(previous.Ingress) == 0 && len(status.Ingress) == 0) {
		return nil
	}
	lb := map[string]any{"ingress": status.Ingress}
	if len(status.Ingress) == 0 {
		lb["ingress"] = nil
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": lb}})
	_, err := c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// SyncNodes points every load balancer whose node set changed at the current one, and
// writes the status the provider then reports (the nodes' addresses may be it).
func (c *Controller) SyncNodes(ctx context.Context) error {
	nodes, err := c.eligibleNodes()
	if err != nil {
		return err
	}
	hosts := hostsKey(nodes)
	all, err := c.services.List(labels.Everything())
	if err != nil {
		return err
	}
	var failed []string
	for _, s := range all {
		key := serviceKey(s)
		if !wantsLoadBalancer(s) || !hasFinalizer(s) || s.DeletionTimestamp != nil {
			continue
		}
		if last, ok := c.getHosts(key); !ok || last == hosts {
			continue // not ensured yet (its own sync will use these nodes), or unchanged
		}
		svc := s.DeepCopy()
		if err := c.updateHosts(ctx, svc, nodes); err != nil {
			failed = append(failed, key)
			continue
		}
		c.setHosts(key, hosts)
	}
	if len(failed) > 0 {
		return fmt.Errorf("updating the hosts of load balancers %v failed", failed)
	}
	return nil
}

func (c *Controller) updateHosts(ctx context.Context, svc *v1.Service, nodes []*v1.Node) error {
	err := c.balancer.UpdateLoadBalancer(ctx, c.clusterName, svc, nodes)
	if err == cloud.ImplementedElsewhere {
		return nil
	}
	if err != nil {
		if _, exists, gerr := c.balancer.GetLoadBalancer(ctx, c.clusterName, svc); gerr == nil && !exists {
			return nil
		}
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		c.Events.Eventf(svc, v1.EventTypeWarning, "UpdateLoadBalancerFailed", "Error updating load balancer with new hosts %v: %v", names, err)
		return err
	}
	if len(nodes) == 0 {
		c.Events.Event(svc, v1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
	} else {
		c.Events.Event(svc, v1.EventTypeNormal, "UpdatedLoadBalancer", "Updated load balancer with new hosts")
	}
	status, exists, err := c.balancer.GetLoadBalancer(ctx, c.clusterName, svc)
	if err != nil || !exists || status == nil {
		return err
	}
	if err := c.patchStatus(ctx, svc, &svc.Status.LoadBalancer, status); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func (c *Controller) getHosts(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.lastHosts[key]
	return h, ok
}

func (c *Controller) setHosts(key, hosts string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastHosts[key] = hosts
}

func (c *Controller) forgetHosts(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lastHosts, key)
}
