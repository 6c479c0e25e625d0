// Package netpol enforces NetworkPolicies on a node in an nftables table of its own:
// every pod of this node that a policy selects for ingress (or egress) is isolated,
// and a new connection to (or from) it passes only if a rule of one of its policies
// allows the peer and the port; conntrack lets established connections' packets
// through. Compile is a pure function from the observed pods, namespaces and policies
// to the allow rules of this node's isolated pods; Apply writes them in one batch; Run
// follows the apiserver.
package netpol

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Input is what the node observes.
type Input struct {
	NodeName   string
	Pods       []*v1.Pod
	Namespaces []*v1.Namespace
	Policies   []*networkingv1.NetworkPolicy
}

// Ruleset is, for each isolated pod of this node (by address), the rules that allow a
// new connection to it (Ingress) or from it (Egress). An isolated pod without rules
// allows nothing.
type Ruleset struct {
	Ingress map[netip.Addr][]Rule
	Egress  map[netip.Addr][]Rule
}

// Rule allows a connection whose peer is within Peers (any peer when Any) and whose
// destination port matches.
type Rule struct {
	Any   bool
	Peers []Range
	// Proto is the IP protocol (0: any, and then no port); PortLo..PortHi the
	// destination ports (both 0: any port).
	Proto          uint8
	PortLo, PortHi uint16
}

// Range is an inclusive range of IPv4 addresses.
type Range struct{ Lo, Hi netip.Addr }

// Compile computes the rules of this node's pods.
func Compile(in Input) Ruleset {
	rs := Ruleset{Ingress: map[netip.Addr][]Rule{}, Egress: map[netip.Addr][]Rule{}}
	nsLabels := map[string]labels.Set{}
	for _, ns := range in.Namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	var pods []*v1.Pod // every pod with an address, on any node
	for _, p := range in.Pods {
		if _, ok := podAddr(p); ok {
			pods = append(pods, p)
		}
	}
	for _, pol := range in.Policies {
		sel, err := metav1.LabelSelectorAsSelector(&pol.Spec.PodSelector)
		if err != nil {
			continue
		}
		ingress, egress := policyTypes(pol)
		for _, p := range pods {
			addr, _ := podAddr(p)
			if p.Spec.NodeName != in.NodeName || p.Namespace != pol.Namespace || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if ingress {
				rules := rs.Ingress[addr]
				if rules == nil {
					rules = []Rule{} // isolated, even with no rule
				}
				for _, r := range pol.Spec.Ingress {
					rules = append(rules, compileRule(pol.Namespace, r.From, r.Ports, p, pods, nsLabels, true)...)
				}
				rs.Ingress[addr] = rules
			}
			if egress {
				rules := rs.Egress[addr]
				if rules == nil {
					rules = []Rule{}
				}
				for _, r := range pol.Spec.Egress {
					rules = append(rules, compileRule(pol.Namespace, r.To, r.Ports, p, pods, nsLabels, false)...)
				}
				rs.Egress[addr] = rules
			}
		}
	}
	return rs
}

// policyTypes are the directions a policy isolates: its policyTypes, or by default
// Ingress, and Egress when it has egress rules (the API's defaulting).
func policyTypes(pol *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(pol.Spec.PolicyTypes) == 0 {
		return true, len(pol.Spec.Egress) > 0
	}
	for _, t := range pol.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// compileRule turns one ingress (from) or egress (to) rule of a policy selecting pod
// into Rules. A named port is looked up in the pod that receives the connection: the
// selected pod for ingress, each peer pod for egress.
func compileRule(ns string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, pod *v1.Pod,
	pods []*v1.Pod, nsLabels map[string]labels.Set, ingress bool) []Rule {
	anyPeer := len(peers) == 0
	var ranges []Range
	var peerPods []*v1.Pod
	for _, peer := range peers {
		if peer.IPBlock != nil {
			ranges = append(ranges, ipBlock(peer.IPBlock)...)
			continue
		}
		for _, p := range selectPods(ns, peer, pods, nsLabels) {
			addr, _ := podAddr(p)
			ranges = append(ranges, Range{addr, addr})
			peerPods = append(peerPods, p)
		}
	}
	ranges = mergeRanges(ranges)
	if !anyPeer && len(ranges) == 0 {
		return nil // selects no peer (yet)
	}
	if len(ports) == 0 {
		return []Rule{{Any: anyPeer, Peers: ranges}}
	}
	var out []Rule
	for _, port := range ports {
		proto := protoNumber(port.Protocol)
		switch {
		case port.Port == nil:
			out = append(out, Rule{Any: anyPeer, Peers: ranges, Proto: proto})
		case port.Port.StrVal == "" || port.Port.IntVal != 0:
			lo := uint16(port.Port.IntVal)
			hi := lo
			if port.EndPort != nil && *port.EndPort >= port.Port.IntVal {
				hi = uint16(*port.EndPort)
			}
			out = append(out, Rule{Any: anyPeer, Peers: ranges, Proto: proto, PortLo: lo, PortHi: hi})
		case ingress:
			if n, ok := namedPort(pod, port.Port.StrVal, port.Protocol); ok {
				out = append(out, Rule{Any: anyPeer, Peers: ranges, Proto: proto, PortLo: n, PortHi: n})
			}
		default:
			// Egress to a named port: only pods can have one, each its own number.
			targets := peerPods
			if anyPeer {
				targets = pods
			}
			for _, p := range targets {
				if n, ok := namedPort(p, port.Port.StrVal, port.Protocol); ok {
					addr, _ := podAddr(p)
					out = append(out, Rule{Peers: []Range{{addr, addr}}, Proto: proto, PortLo: n, PortHi: n})
				}
			}
		}
	}
	return out
}

// selectPods are the pods a peer's podSelector and namespaceSelector choose: without
// a namespaceSelector, in the policy's namespace; without a podSelector, all of them.
func selectPods(ns string, peer networkingv1.NetworkPolicyPeer, pods []*v1.Pod, nsLabels map[string]labels.Set) []*v1.Pod {
	podSel, nsSel := labels.Everything(), labels.Selector(nil)
	if peer.PodSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err != nil {
			return nil
		}
		podSel = s
	}
	if peer.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		if err != nil {
			return nil
		}
		nsSel = s
	}
	var out []*v1.Pod
	for _, p := range pods {
		if nsSel == nil && p.Namespace != ns {
			continue
		}
		if nsSel != nil && !nsSel.Matches(nsLabels[p.Namespace]) {
			continue
		}
		if podSel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// ipBlock is a CIDR without its exceptions, as ranges.
func ipBlock(b *networkingv1.IPBlock) []Range {
	p, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !p.Addr().Is4() {
		return nil
	}
	out := []Range{prefixRange(p)}
	for _, e := range b.Except {
		ep, err := netip.ParsePrefix(e)
		if err != nil || !ep.Addr().Is4() {
			continue
		}
		out = subtract(out, prefixRange(ep))
	}
	return out
}

func prefixRange(p netip.Prefix) Range {
	p = p.Masked()
	lo := p.Addr().As4()
	hi := lo
	for i := p.Bits(); i < 32; i++ {
		hi[i/8] |= 0x80 >> (i % 8)
	}
	return Range{p.Addr(), netip.AddrFrom4(hi)}
}

// subtract removes x from every range.
func subtract(rs []Range, x Range) []Range {
	var out []Range
	for _, r := range rs {
		if x.Hi.Less(r.Lo) || r.Hi.Less(x.Lo) {
			out = append(out, r)
			continue
		}
		if r.Lo.Less(x.Lo) {
			out = append(out, Range{r.Lo, x.Lo.Prev()})
		}
		if x.Hi.Less(r.Hi) {
			out = append(out, Range{x.Hi.Next(), r.Hi})
		}
	}
	return out
}

// mergeRanges sorts ranges and joins those that overlap or touch (an nftables interval
// set holds no overlapping elements).
func mergeRanges(rs []Range) []Range {
	slices.SortFunc(rs, func(a, b Range) int { return a.Lo.Compare(b.Lo) })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && (r.Lo.Compare(out[n-1].Hi) <= 0 || (out[n-1].Hi.Next().IsValid() && r.Lo == out[n-1].Hi.Next())) {
			if out[n-1].Hi.Less(r.Hi) {
				out[n-1].Hi = r.Hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func podAddr(p *v1.Pod) (netip.Addr, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(p.Status.PodIP)
	return a, err == nil && a.Is4()
}

func protoNumber(p *v1.Protocol) uint8 {
	if p == nil {
		return 6
	}
	switch *p {
	case v1.ProtocolUDP:
		return 17
	case v1.ProtocolSCTP:
		return 132
	}
	return 6
}

// namedPort finds a container port of the pod by name and protocol.
func namedPort(p *v1.Pod, name string, proto *v1.Protocol) (uint16, bool) {
	want := v1.ProtocolTCP
	if proto != nil {
		want = *proto
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			got := cp.Protocol
			if got == "" {
				got = v1.ProtocolTCP
			}
			if cp.Name == name && got == want {
				return uint16(cp.ContainerPort), true
			}
		}
	}
	return 0, false
}
