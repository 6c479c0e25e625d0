package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes this package adds (rtnetlink's protocol field), so
// that it finds and removes its own and no one else's.
const RouteProtocol netlink.RouteProtocol = 77

// programmer writes the pod network into one network namespace through netlink.
type programmer struct {
	h *netlink.Handle
	// dev is the vxlan device's name; vni and port its VNI and UDP port.
	dev       string
	vni, port int
	// cluster bounds the routes this package owns: none outside it is touched.
	cluster netip.Prefix
}

// directlyReachable tells whether ip is on a network of this machine's links (the
// kernel's route to it has no gateway).
func (p *programmer) directlyReachable(ip netip.Addr) bool {
	routes, err := p.h.RouteGet(ip.AsSlice())
	if err != nil || len(routes) == 0 {
		return false
	}
	return routes[0].Gw == nil
}

// ensureVXLAN creates (or fixes) the vxlan device on the link holding the node's
// address, with the pod CIDR's network address, and returns the device.
func (p *programmer) ensureVXLAN(me self) (netlink.Link, error) {
	parent, err := p.linkWithAddr(me.NodeIP)
	if err != nil {
		return nil, err
	}
	want := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: p.dev, MTU: parent.Attrs().MTU - vxlanOverhead},
		VxlanId:   p.vni, VtepDevIndex: parent.Attrs().Index, SrcAddr: me.NodeIP.AsSlice(), Port: p.port, Learning: false,
	}
	link, err := p.h.LinkByName(p.dev)
	if err == nil {
		vx, ok := link.(*netlink.Vxlan)
		if !ok || vx.VxlanId != want.VxlanId || vx.Port != want.Port || vx.VtepDevIndex != want.VtepDevIndex ||
			!vx.SrcAddr.Equal(want.SrcAddr) || vx.Learning {
			if err := p.h.LinkDel(link); err != nil {
				return nil, fmt.Errorf("replacing %s: %w", p.dev, err)
			}
			link = nil
		}
	} else if !isNotFound(err) {
		return nil, err
	} else {
		link = nil
	}
	if link == nil {
		if err := p.h.LinkAdd(want); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return nil, fmt.Errorf("creating vxlan device %s (VNI %d, port %d): another vxlan device on this machine already uses that VNI and port: %w", p.dev, p.vni, p.port, err)
			}
			return nil, fmt.Errorf("creating vxlan device %s: %w", p.dev, err)
		}
		if link, err = p.h.LinkByName(p.dev); err != nil {
			return nil, err
		}
	}
	if link.Attrs().MTU != want.MTU {
		if err := p.h.LinkSetMTU(link, want.MTU); err != nil {
			return nil, err
		}
	}
	addr := netip.PrefixFrom(vtepAddr(me.PodCIDR), 32)
	addrs, err := p.h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	have := false
	for _, a := range addrs {
		if a.IPNet.String() == addr.String() {
			have = true
			continue
		}
		if err := p.h.AddrDel(link, &a); err != nil {
			return nil, err
		}
	}
	if !have {
		if err := p.h.AddrAdd(link, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
			return nil, fmt.Errorf("addressing %s: %w", p.dev, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := p.h.LinkSetUp(link); err != nil {
			return nil, err
		}
	}
	return link, nil
}

// linkWithAddr finds the link holding ip.
func (p *programmer) linkWithAddr(ip netip.Addr) (netlink.Link, error) {
	addrs, err := p.h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if a.IP.Equal(ip.AsSlice()) {
			return p.h.LinkByIndex(a.LinkIndex)
		}
	}
	return nil, fmt.Errorf("no link of this machine has the node's address %s", ip)
}

// syncVXLANPeers makes the forwarding, neighbour and route entries of dev exactly
// those of peers.
func (p *programmer) syncVXLANPeers(link netlink.Link, peers []peer) error {
	idx := link.Attrs().Index
	var errs []error
	wantFDB, wantNeigh := map[string]string{}, map[string]bool{}
	var routes []netlink.Route
	for _, pe := range peers {
		vtep := vtepAddr(pe.PodCIDR)
		wantFDB[pe.VTEPMAC.String()] = pe.PublicIP.String()
		wantNeigh[vtep.String()] = true
		errs = append(errs, p.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT,
			Flags: netlink.NTF_SELF, IP: pe.PublicIP.AsSlice(), HardwareAddr: pe.VTEPMAC}))
		errs = append(errs, p.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
			Type: unix.RTN_UNICAST, IP: vtep.AsSlice(), HardwareAddr: pe.VTEPMAC}))
		routes = append(routes, netlink.Route{LinkIndex: idx, Dst: ipNet(pe.PodCIDR), Gw: vtep.AsSlice(),
			Flags: int(netlink.FLAG_ONLINK), Protocol: RouteProtocol})
	}
	fdb, err := p.h.NeighList(idx, unix.AF_BRIDGE)
	if err != nil {
		return err
	}
	for _, n := range fdb {
		if dst, ok := wantFDB[n.HardwareAddr.String()]; !ok || n.IP == nil || n.IP.String() != dst {
			n := n
			errs = append(errs, ignoreNotFound(p.h.NeighDel(&n)))
		}
	}
	neighs, err := p.h.NeighList(idx, unix.AF_INET)
	if err != nil {
		return err
	}
	for _, n := range neighs {
		if n.State&netlink.NUD_PERMANENT != 0 && !wantNeigh[n.IP.String()] {
			n := n
			errs = append(errs, ignoreNotFound(p.h.NeighDel(&n)))
		}
	}
	errs = append(errs, p.syncRoutes(routes))
	return errors.Join(errs...)
}

// hostGWRoutes are host-gw's routes: each peer's pod CIDR through its address.
func hostGWRoutes(peers []peer) []netlink.Route {
	var routes []netlink.Route
	for _, pe := range peers {
		routes = append(routes, netlink.Route{Dst: ipNet(pe.PodCIDR), Gw: pe.NodeIP.AsSlice(), Protocol: RouteProtocol})
	}
	return routes
}

// syncRoutes makes this package's routes within the cluster CIDR exactly want: it
// adds or replaces those and deletes the rest (a removed node's, the other backend's).
func (p *programmer) syncRoutes(want []netlink.Route) error {
	var errs []error
	keep := map[string]bool{}
	for _, r := range want {
		r := r
		keep[r.Dst.String()] = true
		if err := p.h.RouteReplace(&r); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s: %w", r.Dst, r.Gw, err))
		}
	}
	have, err := p.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, r := range have {
		if r.Dst == nil || keep[r.Dst.String()] {
			continue
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		if ones, _ := r.Dst.Mask.Size(); !ok || !p.cluster.Contains(dst.Unmap()) || ones < p.cluster.Bits() {
			continue
		}
		r := r
		errs = append(errs, ignoreNotFound(p.h.RouteDel(&r)))
	}
	return errors.Join(errs...)
}

// hasVXLAN tells whether the vxlan device exists.
func (p *programmer) hasVXLAN() bool {
	_, err := p.h.LinkByName(p.dev)
	return err == nil
}

// removeVXLAN deletes the vxlan device (its entries and routes go with it).
func (p *programmer) removeVXLAN() error {
	link, err := p.h.LinkByName(p.dev)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	return p.h.LinkDel(link)
}

// enableForwarding turns on IPv4 forwarding in this network namespace: a node routes
// its pods' packets.
func enableForwarding() error {
	const path = "/proc/sys/net/ipv4/ip_forward"
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[0] == '1' {
		return nil
	}
	return os.WriteFile(path, []byte("1\n"), 0o644)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

func ignoreNotFound(err error) error {
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}
