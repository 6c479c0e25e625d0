package podnet

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// peer is another node as the pod network sees it.
type peer struct {
	Name    string
	PodCIDR netip.Prefix
	NodeIP  netip.Addr
	// VTEPMAC and PublicIP are the node's vxlan endpoint (vxlan mode only).
	VTEPMAC  net.HardwareAddr
	PublicIP netip.Addr
}

// self is this node as the pod network needs it.
type self struct {
	PodCIDR netip.Prefix
	NodeIP  netip.Addr
}

// plan is what this node should program: the reachable peers, and what keeps the
// others out (one line per node, for the Node's condition).
type plan struct {
	Peers    []peer
	Problems []string
	// Others counts the other machines' nodes with a pod CIDR and an address, reachable
	// or not: with none, a vxlan device is not needed yet.
	Others int
}

// selfOf reads this node's pod CIDR and InternalIP; ok is false until it has both.
func selfOf(n *v1.Node) (self, bool) {
	cidr, ok := podCIDROf(n)
	ip, ok2 := internalIP(n)
	return self{PodCIDR: cidr, NodeIP: ip}, ok && ok2
}

// makePlan decides which of the other nodes this one can reach in mode. A node still
// without a pod CIDR or an address is left out silently: it has not finished joining.
// So is a node on this very machine (its InternalIP is this node's, as when tests run
// several nodes on one host): its bridge is local, and a route would replace the
// kernel's own. reachable tells whether an address is on a directly connected network
// (host-gw's requirement).
func makePlan(mode Mode, me string, myIP netip.Addr, nodes []*v1.Node, reachable func(netip.Addr) bool) plan {
	var p plan
	for _, n := range nodes {
		if n.Name == me {
			continue
		}
		cidr, ok := podCIDROf(n)
		ip, ok2 := internalIP(n)
		if !ok || !ok2 || n.DeletionTimestamp != nil || ip == myIP {
			continue
		}
		p.Others++
		pe := peer{Name: n.Name, PodCIDR: cidr, NodeIP: ip}
		switch mode {
		case HostGW:
			if !reachable(ip) {
				p.Problems = append(p.Problems, fmt.Sprintf("node %s (%s) is not on a directly connected network: host-gw cannot route its pods %s (use --pod-network vxlan)", n.Name, ip, cidr))
				continue
			}
		case VXLAN:
			backend := n.Annotations[AnnotationBackend]
			if backend != "" && backend != string(VXLAN) {
				p.Problems = append(p.Problems, fmt.Sprintf("node %s runs the %s pod network, not vxlan: its pods %s are unreachable", n.Name, backend, cidr))
				continue
			}
			mac, err := net.ParseMAC(n.Annotations[AnnotationVTEPMAC])
			pub, err2 := netip.ParseAddr(n.Annotations[AnnotationPublicIP])
			if backend == "" || err != nil || err2 != nil {
				continue // not published yet
			}
			pe.VTEPMAC, pe.PublicIP = mac, pub
		}
		p.Peers = append(p.Peers, pe)
	}
	slices.SortFunc(p.Peers, func(a, b peer) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(p.Problems)
	return p
}

func podCIDROf(n *v1.Node) (netip.Prefix, bool) {
	c, err := netip.ParsePrefix(n.Spec.PodCIDR)
	if err != nil || !c.Addr().Is4() {
		return netip.Prefix{}, false
	}
	return c.Masked(), true
}

func internalIP(n *v1.Node) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}
