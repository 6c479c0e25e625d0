package local

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metaListAll = metav1.ListOptions{}

// balancer is one Service's load balancer: an address of the pool, or the nodes'
// addresses on the Service's ports. The proxy of every node does the balancing; what
// the provider keeps is who holds which address and port.
type balancer struct {
	ip     netip.Addr // pool mode
	ports  []string   // node mode: "80/TCP", ...
	status v1.LoadBalancerStatus
}

func serviceKey(svc *v1.Service) string { return svc.Namespace + "/" + svc.Name }

// GetLoadBalancerName is upstream's default name: "a" and the Service's UID without dashes.
func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	name := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	return name
}

// GetLoadBalancer returns the status of the Service's load balancer, if it has one.
func (p *Provider) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.lbs[serviceKey(svc)]
	if b == nil {
		return nil, false, nil
	}
	return b.status.DeepCopy(), true, nil
}

// EnsureLoadBalancer gives the Service an address of the pool (its spec.loadBalancerIP
// if it asks for one) or, without a pool, the nodes' addresses on its ports.
func (p *Provider) EnsureLoadBalancer(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := serviceKey(svc)
	if p.pool != nil {
		ip, err := p.pickLocked(svc)
		if err != nil {
			return nil, err
		}
		b := &balancer{ip: ip, status: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{ingressFor(ip)}}}
		p.lbs[key] = b
		return b.status.DeepCopy(), nil
	}
	if svc.Spec.LoadBalancerIP != "" {
		return nil, fmt.Errorf("spec.loadBalancerIP %s cannot be given: without --lb-ip-pool load balancers take the nodes' addresses", svc.Spec.LoadBalancerIP)
	}
	ports := servicePorts(svc)
	for other, b := range p.lbs {
		if other == key {
			continue
		}
		for _, port := range ports {
			if slices.Contains(b.ports, port) {
				return nil, fmt.Errorf("port %s of the nodes' addresses is already taken by the load balancer of service %s", port, other)
			}
		}
	}
	status, err := nodesStatus(nodes)
	if err != nil {
		return nil, err
	}
	b := &balancer{ports: ports, status: status}
	p.lbs[key] = b
	return b.status.DeepCopy(), nil
}

// UpdateLoadBalancer follows the nodes: a pool address is answered by every node
// whatever the set, the nodes' addresses change with it.
func (p *Provider) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.lbs[serviceKey(svc)]
	if b == nil {
		return fmt.Errorf("service %s has no load balancer to update", serviceKey(svc))
	}
	if b.ip.IsValid() {
		return nil
	}
	status, err := nodesStatus(nodes)
	if err != nil {
		return err
	}
	b.status = status
	return nil
}

// EnsureLoadBalancerDeleted frees the Service's address or ports.
func (p *Provider) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.lbs, serviceKey(svc))
	return nil
}

// adoptLocked records the load balancer an existing Service already shows in its
// status, so that a restarted provider keeps it.
func (p *Provider) adoptLocked(svc *v1.Service) {
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
		return
	}
	key := serviceKey(svc)
	if p.pool == nil {
		p.lbs[key] = &balancer{ports: servicePorts(svc), status: *svc.Status.LoadBalancer.DeepCopy()}
		return
	}
	used := p.usedLocked(key)
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ip, err := netip.ParseAddr(in.IP)
		if err == nil && p.pool.contains(ip) && used[ip] == "" {
			p.lbs[key] = &balancer{ip: ip, status: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{ingressFor(ip)}}}
			return
		}
	}
}

// usedLocked maps the pool addresses held by Services other than key to their holder.
func (p *Provider) usedLocked(key string) map[netip.Addr]string {
	used := map[netip.Addr]string{}
	for other, b := range p.lbs {
		if other != key && b.ip.IsValid() {
			used[b.ip] = other
		}
	}
	return used
}

// pickLocked chooses the Service's pool address: the one it asks for, the one it
// holds, the one its status shows, or the lowest free one.
func (p *Provider) pickLocked(svc *v1.Service) (netip.Addr, error) {
	key := serviceKey(svc)
	used := p.usedLocked(key)
	if want := svc.Spec.LoadBalancerIP; want != "" {
		ip, err := netip.ParseAddr(want)
		if err != nil || !p.pool.contains(ip) {
			return netip.Addr{}, fmt.Errorf("spec.loadBalancerIP %s is not in the load balancer pool %s", want, p.pool)
		}
		if holder := used[ip]; holder != "" {
			return netip.Addr{}, fmt.Errorf("spec.loadBalancerIP %s is already used by service %s", want, holder)
		}
		return ip, nil
	}
	if b := p.lbs[key]; b != nil && b.ip.IsValid() {
		return b.ip, nil
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil && p.pool.contains(ip) && used[ip] == "" {
			return ip, nil
		}
	}
	for ip := p.pool.first; ; ip = ip.Next() {
		if used[ip] == "" {
			return ip, nil
		}
		if ip == p.pool.last {
			break
		}
	}
	return netip.Addr{}, fmt.Errorf("the load balancer pool %s is exhausted: all %d addresses are in use", p.pool, p.pool.size())
}

func ingressFor(ip netip.Addr) v1.LoadBalancerIngress {
	vip := v1.LoadBalancerIPModeVIP
	return v1.LoadBalancerIngress{IP: ip.String(), IPMode: &vip}
}

// nodesStatus lists each node's ExternalIP, or its InternalIP if it has none, as
// k3s's ServiceLB does; IPv4 only, as the proxy.
func nodesStatus(nodes []*v1.Node) (v1.LoadBalancerStatus, error) {
	var ips []netip.Addr
	for _, n := range nodes {
		var external, internal []netip.Addr
		for _, a := range n.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || !ip.Is4() {
				continue
			}
			switch a.Type {
			case v1.NodeExternalIP:
				external = append(external, ip)
			case v1.NodeInternalIP:
				internal = append(internal, ip)
			}
		}
		if len(external) > 0 {
			ips = append(ips, external...)
		} else {
			ips = append(ips, internal...)
		}
	}
	slices.SortFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
	ips = slices.Compact(ips)
	if len(ips) == 0 {
		return v1.LoadBalancerStatus{}, fmt.Errorf("no node has an IPv4 address to serve the load balancer on")
	}
	var status v1.LoadBalancerStatus
	for _, ip := range ips {
		status.Ingress = append(status.Ingress, ingressFor(ip))
	}
	return status, nil
}

func servicePorts(svc *v1.Service) []string {
	var ports []string
	for _, sp := range svc.Spec.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		ports = append(ports, fmt.Sprintf("%d/%s", sp.Port, proto))
	}
	return ports
}

// pool is the --lb-ip-pool: IPv4 addresses from first to last.
type pool struct {
	text        string
	first, last netip.Addr
}

func (p *pool) String() string { return p.text }

func (p *pool) contains(ip netip.Addr) bool {
	return ip.Is4() && p.first.Compare(ip) <= 0 && ip.Compare(p.last) <= 0
}

func (p *pool) size() int {
	a, b := p.first.As4(), p.last.As4()
	u := func(x [4]byte) int { return int(x[0])<<24 | int(x[1])<<16 | int(x[2])<<8 | int(x[3]) }
	return u(b) - u(a) + 1
}

// parsePool reads a CIDR (its network and broadcast addresses left out when it has
// more than two) or a range FIRST-LAST.
func parsePool(s string) (*pool, error) {
	s = strings.TrimSpace(s)
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		first, err1 := netip.ParseAddr(strings.TrimSpace(lo))
		last, err2 := netip.ParseAddr(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || !first.Is4() || !last.Is4() {
			return nil, fmt.Errorf("%q is not an IPv4 range FIRST-LAST", s)
		}
		if last.Less(first) {
			return nil, fmt.Errorf("%q: %s comes after %s", s, first, last)
		}
		return &pool{text: s, first: first, last: last}, nil
	}
	prefix, err := netip.ParsePrefix(s)
	if err != nil || !prefix.Addr().Is4() {
		return nil, fmt.Errorf("%q is neither an IPv4 CIDR nor a range FIRST-LAST", s)
	}
	prefix = prefix.Masked()
	first := prefix.Addr()
	b := first.As4()
	host := uint32(1)<<(32-prefix.Bits()) - 1
	n := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	last := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	if prefix.Bits() < 31 {
		first, last = first.Next(), last.Prev()
	}
	return &pool{text: s, first: first, last: last}, nil
}
