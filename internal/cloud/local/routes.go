package local

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"mizzen/internal/cloud"
)

// RouteProtocol marks the kernel routes this provider makes (rtnetlink's protocol
// field), so that it lists and deletes its own and never anyone else's.
const RouteProtocol = 196

// RouteOptions configure the routes the provider programs on this machine: one per
// other node's pod CIDR, through that node's InternalIP (host-gw: the nodes share an
// L2 segment).
type RouteOptions struct {
	// ClusterCIDR bounds the routes the provider lists as its own.
	ClusterCIDR netip.Prefix
	// Table is the routing table; 0 means main.
	Table int
	// Handle is the netlink handle to program through; nil means this process's
	// network namespace. Tests pass one of another namespace.
	Handle *netlink.Handle
}

type routes struct {
	opts RouteOptions
	h    *netlink.Handle

	mu sync.Mutex
	// own are the pod CIDRs of this machine's node, which need no kernel route: listed
	// as routes all the same, so that the controller does not ask for them again.
	own map[netip.Prefix]netip.Addr
}

var _ cloud.Routes = (*routes)(nil)

func newRoutes(opts RouteOptions) *routes {
	if opts.Table == 0 {
		opts.Table = unix.RT_TABLE_MAIN
	}
	h := opts.Handle
	if h == nil {
		h = &netlink.Handle{}
	}
	return &routes{opts: opts, h: h, own: map[netip.Prefix]netip.Addr{}}
}

// ListRoutes lists this provider's routes within the cluster CIDR. Their target is
// known by its address only: TargetNodeAddresses holds the gateway.
func (r *routes) ListRoutes(context.Context, string) ([]*cloud.Route, error) {
	filter := &netlink.Route{Table: r.opts.Table, Protocol: RouteProtocol}
	list, err := r.h.RouteListFiltered(netlink.FAMILY_V4, filter, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	var out []*cloud.Route
	for _, rt := range list {
		if rt.Dst == nil {
			continue
		}
		dst, ok := prefixOf(rt.Dst)
		if !ok || (r.opts.ClusterCIDR.IsValid() && !r.opts.ClusterCIDR.Overlaps(dst)) {
			continue
		}
		route := &cloud.Route{Name: dst.String(), DestinationCIDR: dst.String()}
		if rt.Gw != nil {
			route.TargetNodeAddresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: rt.Gw.String()}}
		} else {
			route.Blackhole = true
		}
		out = append(out, route)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for dst, gw := range r.own {
		out = append(out, &cloud.Route{Name: dst.String(), DestinationCIDR: dst.String(),
			TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: gw.String()}}})
	}
	return out, nil
}

// CreateRoute routes the destination through the target's InternalIP. A target that
// is this machine needs none: its pod CIDR is on its own bridge.
func (r *routes) CreateRoute(_ context.Context, _ string, _ string, route *cloud.Route) error {
	dst, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil || !dst.Addr().Is4() {
		return fmt.Errorf("route to %q: not an IPv4 CIDR", route.DestinationCIDR)
	}
	gw := internalIP(route.TargetNodeAddresses)
	if !gw.IsValid() {
		return fmt.Errorf("route to %s: node %s has no IPv4 InternalIP to route through", dst, route.TargetNode)
	}
	local, err := r.isLocal(gw)
	if err != nil {
		return err
	}
	if local {
		r.mu.Lock()
		r.own[dst.Masked()] = gw
		r.mu.Unlock()
		return nil
	}
	err = r.h.RouteReplace(&netlink.Route{
		Dst: ipNet(dst), Gw: net.IP(gw.AsSlice()), Table: r.opts.Table, Protocol: RouteProtocol,
	})
	if err != nil {
		return fmt.Errorf("route %s via %s: %w", dst, gw, err)
	}
	return nil
}

// DeleteRoute deletes this provider's route to the destination.
func (r *routes) DeleteRoute(_ context.Context, _ string, route *cloud.Route) error {
	dst, err := netip.ParsePrefix(route.DestinationCIDR)
	if err != nil {
		return fmt.Errorf("route to %q: not a CIDR", route.DestinationCIDR)
	}
	r.mu.Lock()
	_, own := r.own[dst.Masked()]
	delete(r.own, dst.Masked())
	r.mu.Unlock()
	if own {
		return nil
	}
	err = r.h.RouteDel(&netlink.Route{Dst: ipNet(dst), Table: r.opts.Table, Protocol: RouteProtocol})
	if err != nil && err != unix.ESRCH {
		return fmt.Errorf("deleting route %s: %w", dst, err)
	}
	return nil
}

// isLocal tells whether ip is an address of this machine (of the handle's namespace).
func (r *routes) isLocal(ip netip.Addr) (bool, error) {
	addrs, err := r.h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return false, fmt.Errorf("listing addresses: %w", err)
	}
	for _, a := range addrs {
		if got, ok := netip.AddrFromSlice(a.IP.To4()); ok && got == ip {
			return true, nil
		}
	}
	return false, nil
}

func internalIP(addrs []v1.NodeAddress) netip.Addr {
	for _, a := range addrs {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
			return ip
		}
	}
	return netip.Addr{}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP.To4())
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip, ones).Masked(), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}
