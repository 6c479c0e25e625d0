// Package cloud is the cloud provider interface of the cloud-controller-manager, shaped
// like upstream's k8s.io/cloud-provider (which mizzen does not import): a provider
// offers LoadBalancer, InstancesV2, Zones and Routes, each optional, and the
// controllers under internal/cloud/controller drive them from the API's objects.
// Well-known names (taints, annotations, the finalizer) are upstream's.
package cloud

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Names shared with upstream's kubelet and cloud-provider.
const (
	// TaintExternalCloudProvider is the taint a kubelet started with
	// --cloud-provider external registers its Node with; the node controller removes
	// it once the provider has initialized the node.
	TaintExternalCloudProvider = "node.cloudprovider.kubernetes.io/uninitialized"
	// TaintNodeShutdown marks a node whose instance the provider reports shut down.
	TaintNodeShutdown = "node.cloudprovider.kubernetes.io/shutdown"
	// AnnotationProvidedNodeIP is the kubelet's --node-ip, for the provider to honour.
	AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"
	// LoadBalancerCleanupFinalizer keeps a Service until its load balancer is gone.
	LoadBalancerCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"
	// LabelExcludeFromLoadBalancers leaves a node out of every load balancer.
	LabelExcludeFromLoadBalancers = "node.kubernetes.io/exclude-from-external-load-balancers"
	// LabelNodeLifecycleExclude leaves a node out of the node-lifecycle controller.
	LabelNodeLifecycleExclude = "node.kubernetes.io/exclude-from-lifecycle-management"
)

// Errors a provider returns, as upstream's.
var (
	InstanceNotFound     = errors.New("instance not found")
	NotImplemented       = errors.New("unimplemented")
	ImplementedElsewhere = errors.New("implemented by alternate to cloud provider")
)

// Interface is a cloud provider. Each capability is optional: its accessor's second
// result says whether the provider has it.
type Interface interface {
	// Initialize is called once, before any controller runs, with the
	// cloud-controller-manager's client.
	Initialize(ctx context.Context, client kubernetes.Interface) error
	LoadBalancer() (LoadBalancer, bool)
	InstancesV2() (InstancesV2, bool)
	Zones() (Zones, bool)
	Routes() (Routes, bool)
	ProviderName() string
}

// LoadBalancer makes Services of type LoadBalancer reachable.
type LoadBalancer interface {
	// GetLoadBalancer returns the load balancer of service as it is now, and whether
	// it exists.
	GetLoadBalancer(ctx context.Context, clusterName string, service *v1.Service) (status *v1.LoadBalancerStatus, exists bool, err error)
	// GetLoadBalancerName names the load balancer of service.
	GetLoadBalancerName(ctx context.Context, clusterName string, service *v1.Service) string
	// EnsureLoadBalancer creates or updates the load balancer of service over nodes and
	// returns its status. It must not modify service or nodes.
	EnsureLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error)
	// UpdateLoadBalancer points an existing load balancer at nodes.
	UpdateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) error
	// EnsureLoadBalancerDeleted deletes the load balancer if it exists; nil if it did not.
	EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *v1.Service) error
}

// InstancesV2 answers about the machines behind Nodes.
type InstancesV2 interface {
	// InstanceExists tells whether the node's instance still exists.
	InstanceExists(ctx context.Context, node *v1.Node) (bool, error)
	// InstanceShutdown tells whether the node's instance is shut down.
	InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error)
	// InstanceMetadata describes the node's instance.
	InstanceMetadata(ctx context.Context, node *v1.Node) (*InstanceMetadata, error)
}

// InstanceMetadata is what the node controller writes onto a Node.
type InstanceMetadata struct {
	// ProviderID is spec.providerID, e.g. local://NAME.
	ProviderID string
	// InstanceType is the node.kubernetes.io/instance-type label.
	InstanceType string
	// NodeAddresses are status.addresses.
	NodeAddresses []v1.NodeAddress
	// Zone and Region are the topology.kubernetes.io/zone and region labels.
	Zone, Region string
	// AdditionalLabels are set on the node unless it has them or they lie in a
	// kubernetes.io or k8s.io namespace.
	AdditionalLabels map[string]string
}

// Zone is a failure domain and its region.
type Zone struct {
	FailureDomain string
	Region        string
}

// Zones answers where nodes are.
type Zones interface {
	// GetZone is the zone of the machine the controller runs on.
	GetZone(ctx context.Context) (Zone, error)
	GetZoneByProviderID(ctx context.Context, providerID string) (Zone, error)
	GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (Zone, error)
}

// Route sends DestinationCIDR (a node's pod CIDR) to TargetNode.
type Route struct {
	// Name identifies the route to its provider.
	Name                string
	TargetNode          types.NodeName
	TargetNodeAddresses []v1.NodeAddress
	DestinationCIDR     string
	// Blackhole marks a route whose target is gone; the route controller deletes it.
	Blackhole bool
}

// Routes programs the routes between nodes' pod CIDRs.
type Routes interface {
	// ListRoutes lists the routes this provider manages for the cluster.
	ListRoutes(ctx context.Context, clusterName string) ([]*Route, error)
	// CreateRoute creates route; nameHint is unique to it (the node's UID).
	CreateRoute(ctx context.Context, clusterName string, nameHint string, route *Route) error
	// DeleteRoute deletes route.
	DeleteRoute(ctx context.Context, clusterName string, route *Route) error
}
