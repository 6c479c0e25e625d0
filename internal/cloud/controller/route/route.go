// Package route is the cloud-controller-manager's route controller (upstream's
// node-route-controller): when the provider owns the routing between nodes, every
// reconciliation period it makes sure each node's pod CIDR has a route to that node,
// deletes the provider's routes within the cluster CIDR that no node needs, and
// reports the result in each node's NetworkUnavailable condition, as upstream.
package route

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
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
const Component = "route_controller"

// Controller reconciles the provider's routes with the nodes' pod CIDRs.
type Controller struct {
	client      kubernetes.Interface
	routes      cloud.Routes
	clusterName string
	clusterCIDR netip.Prefix
	nodes       corelisters.NodeLister
	synced      cache.InformerSynced
	// Events records FailedToCreateRoute; tests swap in a FakeRecorder.
	Events record.EventRecorder
	events *util.Events
	// Period is how often routes are reconciled (upstream: 10 s).
	Period time.Duration
	Log    *slog.Logger
}

// New returns the controller, or an error if the provider has no routes.
func New(client kubernetes.Interface, provider cloud.Interface, clusterName string, clusterCIDR netip.Prefix,
	nodes coreinformers.NodeInformer, period time.Duration) (*Controller, error) {
	routes, ok := provider.Routes()
	if !ok {
		return nil, fmt.Errorf("cloud provider %q does not support routes", provider.ProviderName())
	}
	events := util.NewEvents(client, Component)
	return &Controller{client: client, routes: routes, clusterName: clusterName, clusterCIDR: clusterCIDR,
		nodes: nodes.Lister(), synced: nodes.Informer().HasSynced, Events: events, events: events,
		Period: period, Log: slog.Default()}, nil
}

// Run reconciles every Period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.events.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Reconcile(ctx); err != nil {
			c.Log.Error("reconciling routes", "err", err)
		}
	}, c.Period)
}

// podCIDR is the node's IPv4 pod CIDR, if it has one.
func podCIDR(n *v1.Node) (netip.Prefix, bool) {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, s := range cidrs {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

func internalIP(addrs []v1.NodeAddress) string {
	for _, a := range addrs {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// routeFor tells whether r routes the node's pod CIDR to the node: by name, or by the
// node's InternalIP when the provider knows only the address.
func routeFor(r *cloud.Route, n *v1.Node, cidr netip.Prefix) bool {
	dst, err := netip.ParsePrefix(r.DestinationCIDR)
	if err != nil || dst.Masked() != cidr || r.Blackhole {
		return false
	}
	if r.TargetNode != "" {
		return string(r.TargetNode) == n.Name
	}
	ip := internalIP(r.TargetNodeAddresses)
	return ip != "" && ip == internalIP(n.Status.Addresses)
}

// Reconcile creates the missing routes and deletes the unneeded ones once.
func (c *Controller) Reconcile(ctx context.Context) error {
	routes, err := c.routes.ListRoutes(ctx, c.clusterName)
	if err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	needed := map[*cloud.Route]bool{}
	for _, n := range nodes {
		cidr, ok := podCIDR(n)
		if !ok {
			continue
		}
		var have *cloud.Route
		for _, r := range routes {
			if routeFor(r, n, cidr) {
				have = r
				break
			}
		}
		if have != nil {
			needed[have] = true
			c.setNetworkCondition(ctx, n, true)
			continue
		}
		route := &cloud.Route{TargetNode: types.NodeName(n.Name), TargetNodeAddresses: n.Status.Addresses, DestinationCIDR: cidr.String()}
		start := time.Now()
		if err := c.routes.CreateRoute(ctx, c.clusterName, string(n.UID), route); err != nil {
			c.Events.Eventf(&v1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}, v1.EventTypeWarning, "FailedToCreateRoute",
				"Could not create route %s %s for node %s after %v: %v", n.UID, cidr, n.Name, time.Since(start).Round(time.Millisecond), err)
			c.setNetworkCondition(ctx, n, false)
			continue
		}
		c.Log.Info("created route", "node", n.Name, "cidr", cidr)
		c.setNetworkCondition(ctx, n, true)
	}
	for _, r := range routes {
		if needed[r] {
			continue
		}
		dst, err := netip.ParsePrefix(r.DestinationCIDR)
		if err != nil || (c.clusterCIDR.IsValid() && !c.clusterCIDR.Overlaps(dst)) {
			continue // not the cluster's
		}
		if err := c.routes.DeleteRoute(ctx, c.clusterName, r); err != nil {
			c.Log.Error("deleting route", "cidr", r.DestinationCIDR, "err", err)
			continue
		}
		c.Log.Info("deleted route", "cidr", r.DestinationCIDR)
	}
	return nil
}

// setNetworkCondition writes the node's NetworkUnavailable condition, as upstream's
// route controller words it, when it differs.
func (c *Controller) setNetworkCondition(ctx context.Context, n *v1.Node, routeCreated bool) {
	cond := v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionTrue,
		Reason: "NoRouteCreated", Message: "RouteController failed to create a route"}
	if routeCreated {
		cond.Status, cond.Reason, cond.Message = v1.ConditionFalse, "RouteCreated", "RouteController created a route"
	}
	for _, have := range n.Status.Conditions {
		if have.Type == cond.Type && have.Status == cond.Status && have.Reason == cond.Reason {
			return
		}
	}
	now := metav1.Now()
	cond.LastTransitionTime, cond.LastHeartbeatTime = now, now
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{cond}}})
	if _, err := c.client.CoreV1().Nodes().PatchStatus(ctx, n.Name, patch); err != nil {
		c.Log.Error("updating the NetworkUnavailable condition", "node", n.Name, "err", err)
	}
}
