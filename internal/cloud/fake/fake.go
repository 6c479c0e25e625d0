// Package fake is an in-memory cloud provider for the cloud controllers' tests: it
// answers from its fields and records every call.
package fake

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/cloud"
)

// Provider is a fake cloud. Zero values mean: every capability, no instances known.
type Provider struct {
	mu sync.Mutex
	// Calls records each call as "Method ns/name" or "Method node".
	Calls []string

	// NoLoadBalancer, NoInstances and NoRoutes turn capabilities off.
	NoLoadBalancer, NoInstances, NoRoutes bool

	// Balancers hold the load balancers by namespace/name.
	Balancers map[string]*v1.LoadBalancerStatus
	// EnsureStatus is what EnsureLoadBalancer returns; EnsureErr fails it.
	EnsureStatus *v1.LoadBalancerStatus
	EnsureErr    error
	UpdateErr    error
	DeleteErr    error
	// UpdatedHosts records the node names of the last UpdateLoadBalancer per service.
	UpdatedHosts map[string][]string

	// Metadata, Exists and Shutdown answer InstancesV2 by node name; a node missing
	// from Exists exists.
	Metadata    map[string]*cloud.InstanceMetadata
	MetadataErr error
	Exists      map[string]bool
	Shutdown    map[string]bool

	// RouteList are the routes; CreateErr fails CreateRoute.
	RouteList []*cloud.Route
	CreateErr error
}

var (
	_ cloud.Interface    = (*Provider)(nil)
	_ cloud.LoadBalancer = (*Provider)(nil)
	_ cloud.InstancesV2  = (*Provider)(nil)
	_ cloud.Routes       = (*Provider)(nil)
)

func (p *Provider) record(format string, args ...any) {
	p.Calls = append(p.Calls, fmt.Sprintf(format, args...))
}

// CallsSnapshot returns the calls so far.
func (p *Provider) CallsSnapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.Calls...)
}

func (p *Provider) Initialize(context.Context, kubernetes.Interface) error { return nil }
func (p *Provider) ProviderName() string                                   { return "fake" }
func (p *Provider) LoadBalancer() (cloud.LoadBalancer, bool)               { return p, !p.NoLoadBalancer }
func (p *Provider) InstancesV2() (cloud.InstancesV2, bool)                 { return p, !p.NoInstances }
func (p *Provider) Zones() (cloud.Zones, bool)                             { return nil, false }
func (p *Provider) Routes() (cloud.Routes, bool)                           { return p, !p.NoRoutes }

func key(svc *v1.Service) string { return svc.Namespace + "/" + svc.Name }

func (p *Provider) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("GetLoadBalancer %s", key(svc))
	s, ok := p.Balancers[key(svc)]
	if !ok {
		return nil, false, nil
	}
	return s.DeepCopy(), true, nil
}

func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return "lb-" + string(svc.UID)
}

func (p *Provider) EnsureLoadBalancer(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("EnsureLoadBalancer %s", key(svc))
	if p.EnsureErr != nil {
		return nil, p.EnsureErr
	}
	if p.Balancers == nil {
		p.Balancers = map[string]*v1.LoadBalancerStatus{}
	}
	status := p.EnsureStatus
	if status == nil {
		status = &v1.LoadBalancerStatus{}
	}
	p.Balancers[key(svc)] = status.DeepCopy()
	return status.DeepCopy(), nil
}

func (p *Provider) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("UpdateLoadBalancer %s", key(svc))
	if p.UpdateErr != nil {
		return p.UpdateErr
	}
	if p.UpdatedHosts == nil {
		p.UpdatedHosts = map[string][]string{}
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	p.UpdatedHosts[key(svc)] = names
	return nil
}

func (p *Provider) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("EnsureLoadBalancerDeleted %s", key(svc))
	if p.DeleteErr != nil {
		return p.DeleteErr
	}
	delete(p.Balancers, key(svc))
	return nil
}

func (p *Provider) InstanceExists(_ context.Context, node *v1.Node) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("InstanceExists %s", node.Name)
	exists, known := p.Exists[node.Name]
	return !known || exists, nil
}

func (p *Provider) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("InstanceShutdown %s", node.Name)
	return p.Shutdown[node.Name], nil
}

func (p *Provider) InstanceMetadata(_ context.Context, node *v1.Node) (*cloud.InstanceMetadata, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("InstanceMetadata %s", node.Name)
	if p.MetadataErr != nil {
		return nil, p.MetadataErr
	}
	m, ok := p.Metadata[node.Name]
	if !ok {
		return nil, cloud.InstanceNotFound
	}
	c := *m
	return &c, nil
}

func (p *Provider) ListRoutes(context.Context, string) ([]*cloud.Route, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("ListRoutes")
	return append([]*cloud.Route(nil), p.RouteList...), nil
}

func (p *Provider) CreateRoute(_ context.Context, _ string, _ string, r *cloud.Route) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("CreateRoute %s %s", r.TargetNode, r.DestinationCIDR)
	if p.CreateErr != nil {
		return p.CreateErr
	}
	p.RouteList = append(p.RouteList, &cloud.Route{Name: r.DestinationCIDR, TargetNode: r.TargetNode, DestinationCIDR: r.DestinationCIDR})
	return nil
}

func (p *Provider) DeleteRoute(_ context.Context, _ string, r *cloud.Route) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("DeleteRoute %s", r.DestinationCIDR)
	for i, have := range p.RouteList {
		if have.DestinationCIDR == r.DestinationCIDR {
			p.RouteList = append(p.RouteList[:i], p.RouteList[i+1:]...)
			break
		}
	}
	return nil
}
