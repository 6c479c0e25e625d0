// Package local is the cloud provider `local`, for machines that are no cloud: nodes
// are the machines their kubelets run on (provider ID local://NAME), their addresses
// come from the kubelet's --node-ip or a config file, their zone, region and instance
// type from flags or that file; LoadBalancer Services get the nodes' addresses, as
// k3s's ServiceLB gives them, or addresses of a pool (--lb-ip-pool) that every node's
// proxy answers on; routes between pod CIDRs are this machine's kernel routes.
package local

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"mizzen/internal/cloud"
)

// ProviderName is the --cloud-provider value.
const ProviderName = "local"

// providerIDPrefix starts every provider ID this provider gives.
const providerIDPrefix = ProviderName + "://"

// DefaultInstanceType is the instance type of nodes nothing else describes.
const DefaultInstanceType = "local"

// Options configure the provider.
type Options struct {
	// ConfigFile (--cloud-config) describes nodes; it is read again whenever it changes,
	// so marking a machine shutdown or removed needs no restart. Empty: none.
	ConfigFile string
	// Zone, Region and InstanceType are every node's unless the file says otherwise.
	Zone, Region, InstanceType string
	// LBPool (--lb-ip-pool) is a CIDR or an address range FIRST-LAST that LoadBalancer
	// addresses are taken from; empty gives each Service the nodes' addresses.
	LBPool string
	// Routes program pod CIDR routes on this machine; nil offers no Routes.
	Routes *RouteOptions
}

// Config is the --cloud-config file (YAML or JSON).
type Config struct {
	// Zone, Region and InstanceType override the flags for every node.
	Zone         string `json:"zone,omitempty"`
	Region       string `json:"region,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	// Nodes describe single nodes by name.
	Nodes map[string]NodeConfig `json:"nodes,omitempty"`
}

// NodeConfig describes one node's machine.
type NodeConfig struct {
	Zone         string `json:"zone,omitempty"`
	Region       string `json:"region,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	// InternalIP replaces the kubelet's node IP; ExternalIP adds an ExternalIP address.
	InternalIP string `json:"internalIP,omitempty"`
	ExternalIP string `json:"externalIP,omitempty"`
	// Labels are added to the node (never over labels it has).
	Labels map[string]string `json:"labels,omitempty"`
	// Shutdown reports the machine shut down: the node-lifecycle controller taints its
	// Node while it is not Ready.
	Shutdown bool `json:"shutdown,omitempty"`
	// Removed reports the machine gone: the node-lifecycle controller deletes its Node
	// once it is not Ready.
	Removed bool `json:"removed,omitempty"`
}

// Provider is the local cloud provider.
type Provider struct {
	opts Options
	pool *pool // nil: the nodes' addresses

	mu       sync.Mutex
	cfg      Config
	cfgMod   time.Time
	cfgSize  int64
	lbs      map[string]*balancer // by namespace/name
	initDone bool
}

var (
	_ cloud.Interface    = (*Provider)(nil)
	_ cloud.InstancesV2  = (*Provider)(nil)
	_ cloud.Zones        = (*Provider)(nil)
	_ cloud.LoadBalancer = (*Provider)(nil)
)

// New checks opts and returns the provider.
func New(opts Options) (*Provider, error) {
	p := &Provider{opts: opts, lbs: map[string]*balancer{}}
	if opts.LBPool != "" {
		pl, err := parsePool(opts.LBPool)
		if err != nil {
			return nil, fmt.Errorf("--lb-ip-pool: %w", err)
		}
		p.pool = pl
	}
	if opts.ConfigFile != "" {
		if _, err := p.config(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ProviderName is "local".
func (p *Provider) ProviderName() string { return ProviderName }

// Initialize learns which addresses the existing LoadBalancer Services hold, so a
// restarted controller hands out none of them twice.
func (p *Provider) Initialize(ctx context.Context, client kubernetes.Interface) error {
	svcs, err := client.CoreV1().Services("").List(ctx, metaListAll)
	if err != nil {
		return fmt.Errorf("listing services: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range svcs.Items {
		p.adoptLocked(&svcs.Items[i])
	}
	p.initDone = true
	return nil
}

// LoadBalancer is the provider itself.
func (p *Provider) LoadBalancer() (cloud.LoadBalancer, bool) { return p, true }

// InstancesV2 is the provider itself.
func (p *Provider) InstancesV2() (cloud.InstancesV2, bool) { return p, true }

// Zones is the provider itself.
func (p *Provider) Zones() (cloud.Zones, bool) { return p, true }

// Routes programs this machine's routes, when the options ask for it.
func (p *Provider) Routes() (cloud.Routes, bool) {
	if p.opts.Routes == nil {
		return nil, false
	}
	return newRoutes(*p.opts.Routes), true
}

// config returns the config file's content, read again when it changed.
func (p *Provider) config() (Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.configLocked()
}

func (p *Provider) configLocked() (Config, error) {
	if p.opts.ConfigFile == "" {
		return Config{}, nil
	}
	st, err := os.Stat(p.opts.ConfigFile)
	if err != nil {
		return Config{}, fmt.Errorf("--cloud-config: %w", err)
	}
	if st.ModTime().Equal(p.cfgMod) && st.Size() == p.cfgSize {
		return p.cfg, nil
	}
	data, err := os.ReadFile(p.opts.ConfigFile)
	if err != nil {
		return Config{}, fmt.Errorf("--cloud-config: %w", err)
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("--cloud-config %s: %w", p.opts.ConfigFile, err)
	}
	for name, n := range cfg.Nodes {
		for what, ip := range map[string]string{"internalIP": n.InternalIP, "externalIP": n.ExternalIP} {
			if ip != "" {
				if _, err := netip.ParseAddr(ip); err != nil {
					return Config{}, fmt.Errorf("--cloud-config %s: nodes.%s.%s: %q is not an IP address", p.opts.ConfigFile, name, what, ip)
				}
			}
		}
	}
	p.cfg, p.cfgMod, p.cfgSize = cfg, st.ModTime(), st.Size()
	return cfg, nil
}

// machine is what the flags and the file say about one node.
type machine struct {
	NodeConfig
}

func (p *Provider) machine(name string) (machine, error) {
	cfg, err := p.config()
	if err != nil {
		return machine{}, err
	}
	m := machine{NodeConfig: cfg.Nodes[name]}
	m.Zone = first(m.Zone, cfg.Zone, p.opts.Zone)
	m.Region = first(m.Region, cfg.Region, p.opts.Region)
	m.InstanceType = first(m.InstanceType, cfg.InstanceType, p.opts.InstanceType, DefaultInstanceType)
	return m, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// ownNode tells whether node is this provider's: its provider ID is unset or local://.
func ownNode(node *v1.Node) bool {
	return node.Spec.ProviderID == "" || strings.HasPrefix(node.Spec.ProviderID, providerIDPrefix)
}

// InstanceExists is false for nodes the config file marks removed. Nodes of another
// provider are not this one's to judge and exist.
func (p *Provider) InstanceExists(_ context.Context, node *v1.Node) (bool, error) {
	if !ownNode(node) {
		return true, nil
	}
	m, err := p.machine(node.Name)
	if err != nil {
		return false, err
	}
	return !m.Removed, nil
}

// InstanceShutdown is true for nodes the config file marks shutdown.
func (p *Provider) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	if !ownNode(node) {
		return false, nil
	}
	m, err := p.machine(node.Name)
	if err != nil {
		return false, err
	}
	return m.Shutdown, nil
}

// InstanceMetadata is the node's provider ID local://NAME, its addresses (the config
// file's, else the kubelet's --node-ip, else the InternalIP it posted), and its zone,
// region, instance type and extra labels.
func (p *Provider) InstanceMetadata(_ context.Context, node *v1.Node) (*cloud.InstanceMetadata, error) {
	if !ownNode(node) {
		return nil, fmt.Errorf("node %s has provider ID %q, not one of provider %q", node.Name, node.Spec.ProviderID, ProviderName)
	}
	m, err := p.machine(node.Name)
	if err != nil {
		return nil, err
	}
	internal := m.InternalIP
	if internal == "" {
		internal = node.Annotations[cloud.AnnotationProvidedNodeIP]
	}
	if internal == "" {
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				internal = a.Address
				break
			}
		}
	}
	if internal == "" {
		return nil, fmt.Errorf("node %s has no address: its kubelet gave no --node-ip (annotation %s) nor posted an InternalIP, and --cloud-config names none", node.Name, cloud.AnnotationProvidedNodeIP)
	}
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: internal}}
	if m.ExternalIP != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalIP, Address: m.ExternalIP})
	}
	return &cloud.InstanceMetadata{
		ProviderID: providerIDPrefix + node.Name, InstanceType: m.InstanceType, NodeAddresses: addrs,
		Zone: m.Zone, Region: m.Region, AdditionalLabels: m.Labels,
	}, nil
}

// GetZone is the flags' (or the file's) zone: this machine is no node of its own.
func (p *Provider) GetZone(context.Context) (cloud.Zone, error) {
	m, err := p.machine("")
	if err != nil {
		return cloud.Zone{}, err
	}
	return cloud.Zone{FailureDomain: m.Zone, Region: m.Region}, nil
}

// GetZoneByProviderID is the zone of the node local://NAME.
func (p *Provider) GetZoneByProviderID(ctx context.Context, providerID string) (cloud.Zone, error) {
	name, ok := strings.CutPrefix(providerID, providerIDPrefix)
	if !ok || name == "" {
		return cloud.Zone{}, fmt.Errorf("provider ID %q is not of provider %q", providerID, ProviderName)
	}
	return p.GetZoneByNodeName(ctx, types.NodeName(name))
}

// GetZoneByNodeName is the zone of the node.
func (p *Provider) GetZoneByNodeName(_ context.Context, nodeName types.NodeName) (cloud.Zone, error) {
	m, err := p.machine(string(nodeName))
	if err != nil {
		return cloud.Zone{}, err
	}
	return cloud.Zone{FailureDomain: m.Zone, Region: m.Region}, nil
}
