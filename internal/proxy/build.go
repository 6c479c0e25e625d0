package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Input is what the proxy has observed: the cluster's Services and EndpointSlices, and
// the facts about its own node that decide locality and NodePort addresses.
type Input struct {
	Services       []*v1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	// NodeName decides which endpoints are local to this node.
	NodeName string
	// NodePortAddresses are the addresses NodePorts are served on; with
	// NodePortOnAllLocal they are served on every local address but loopback instead.
	NodePortAddresses  []netip.Addr
	NodePortOnAllLocal bool
	// ClusterCIDR tells pod traffic from other traffic; invalid (zero) when unknown,
	// and then traffic to ClusterIPs is not masqueraded unless MasqueradeAll.
	ClusterCIDR   netip.Prefix
	MasqueradeAll bool
}

// Names of the table's fixed chains, sets and maps, as upstream's.
const (
	chainServices         = "services"
	chainMasquerading     = "masquerading"
	chainMarkForMasq      = "mark-for-masquerade"
	chainServiceEPCheck   = "service-endpoints-check"
	chainNodePortEPCheck  = "nodeport-endpoints-check"
	chainClusterIPsCheck  = "cluster-ips-check"
	chainReject           = "reject-chain"
	chainFirewallCheck    = "firewall-check"
	mapFirewallIPs        = "firewall-ips"
	setClusterIPs         = "cluster-ips"
	setNodePortIPs        = "nodeport-ips"
	mapServiceIPs         = "service-ips"
	mapServiceNodePorts   = "service-nodeports"
	mapNoEndpointServices = "no-endpoint-services"
	mapNoEndpointNodePort = "no-endpoint-nodeports"
)

// endpoint is one backend of a service port.
type endpoint struct {
	addr        netip.Addr
	port        uint16
	nodeName    string
	ready       bool
	serving     bool
	terminating bool
}

// builder accumulates the per-service parts of a ruleset.
type builder struct {
	in            Input
	chains        []Chain
	affinitySets  []Set
	clusterIPs    map[netip.Addr]bool
	serviceIPs    []MapElement
	nodePorts     []MapElement
	noEPServices  []MapElement
	noEPNodePorts []MapElement
	firewallIPs   []MapElement
}

// Build computes the proxy's whole table from what it observed. It is deterministic:
// the same input always gives the same ruleset, in the same order.
func Build(in Input) *Ruleset {
	b := &builder{in: in, clusterIPs: map[netip.Addr]bool{}}
	slices := slicesByService(in.EndpointSlices)
	services := append([]*v1.Service(nil), in.Services...)
	sort.Slice(services, func(i, j int) bool {
		return services[i].Namespace+"/"+services[i].Name < services[j].Namespace+"/"+services[j].Name
	})
	for _, svc := range services {
		b.addService(svc, slices[svc.Namespace+"/"+svc.Name])
	}
	return b.ruleset()
}

// slicesByService groups IPv4 EndpointSlices by the namespace/name of their service.
func slicesByService(all []*discoveryv1.EndpointSlice) map[string][]*discoveryv1.EndpointSlice {
	out := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range all {
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		key := s.Namespace + "/" + name
		out[key] = append(out[key], s)
	}
	return out
}

func protocolOf(p v1.Protocol) (Protocol, bool) {
	switch p {
	case v1.ProtocolTCP, "":
		return TCP, true
	case v1.ProtocolUDP:
		return UDP, true
	case v1.ProtocolSCTP:
		return SCTP, true
	}
	return 0, false
}

// addService adds the rules of every port of one service.
func (b *builder) addService(svc *v1.Service, slices []*discoveryv1.EndpointSlice) {
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !clusterIP.Is4() {
		return // headless ("None"), unallocated, or not IPv4
	}
	b.clusterIPs[clusterIP] = true
	var externalIPs []netip.Addr
	for _, s := range svc.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			externalIPs = append(externalIPs, a)
		}
	}
	var lbIPs []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && a.Is4() {
			externalIPs = append(externalIPs, a)
			lbIPs = append(lbIPs, a)
		}
	}
	var sourceRanges []netip.Prefix
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && p.Addr().Is4() {
			sourceRanges = append(sourceRanges, p.Masked())
		}
	}
	nodePortType := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer
	for _, port := range svc.Spec.Ports {
		proto, ok := protocolOf(port.Protocol)
		if !ok {
			continue
		}
		sp := servicePort{
			base:          fmt.Sprintf("%s/%s/%s/%s", svc.Namespace, svc.Name, proto, port.Name),
			clusterIP:     clusterIP,
			proto:         proto,
			port:          uint16(port.Port),
			externalIPs:   externalIPs,
			lbIPs:         lbIPs,
			sourceRanges:  sourceRanges,
			internalLocal: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
			endpoints:     endpointsFor(slices, port.Name, port.Protocol),
		}
		if nodePortType && port.NodePort != 0 {
			sp.nodePort = uint16(port.NodePort)
		}
		sp.externalLocal = (nodePortType || len(externalIPs) > 0) &&
			svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
		if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
			sp.affinity = defaultAffinityTimeout
			if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				sp.affinity = time.Duration(*c.ClientIP.TimeoutSeconds) * time.Second
			}
		}
		b.addServicePort(sp)
	}
}

// servicePort is one port of one service, with everything its rules depend on.
type servicePort struct {
	base          string // namespace/name/protocol/portname, upstream's chain name base
	clusterIP     netip.Addr
	proto         Protocol
	port          uint16
	nodePort      uint16
	externalIPs   []netip.Addr // externalIPs and load balancer IPs
	lbIPs         []netip.Addr
	sourceRanges  []netip.Prefix // loadBalancerSourceRanges
	internalLocal bool
	externalLocal bool
	// affinity is how long a client sticks to its endpoint (sessionAffinity:
	// ClientIP); zero without affinity.
	affinity  time.Duration
	endpoints []endpoint
}

// defaultAffinityTimeout is upstream's default sessionAffinityConfig timeout (3 hours).
const defaultAffinityTimeout = 10800 * time.Second

// endpointsFor collects the endpoints of the named port from a service's slices, once
// per address and port, sorted.
func endpointsFor(slices []*discoveryv1.EndpointSlice, portName string, protocol v1.Protocol) []endpoint {
	if protocol == "" {
		protocol = v1.ProtocolTCP
	}
	seen := map[string]bool{}
	var out []endpoint
	for _, s := range slices {
		var port int32 = -1
		for _, p := range s.Ports {
			name, proto := "", v1.ProtocolTCP
			if p.Name != nil {
				name = *p.Name
			}
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if name == portName && proto == protocol && p.Port != nil {
				port = *p.Port
			}
		}
		if port <= 0 || port > 65535 {
			continue
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			addr, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil || !addr.Is4() {
				continue
			}
			e := endpoint{addr: addr, port: uint16(port)}
			if ep.NodeName != nil {
				e.nodeName = *ep.NodeName
			}
			// Upstream's reading of the conditions: unset ready means ready, unset
			// serving means as ready, unset terminating means not terminating.
			e.ready = ep.Conditions.Ready == nil || *ep.Conditions.Ready
			e.serving = e.ready
			if ep.Conditions.Serving != nil {
				e.serving = *ep.Conditions.Serving
			}
			e.terminating = ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
			key := netip.AddrPortFrom(addr, uint16(port)).String()
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return netip.AddrPortFrom(out[i].addr, out[i].port).Compare(netip.AddrPortFrom(out[j].addr, out[j].port)) < 0
	})
	return out
}

// usable picks the endpoints traffic may go to among those that pass keep: the ready
// ones, or, when none is ready, the ones still serving while they terminate.
func usable(eps []endpoint, keep func(endpoint) bool) []endpoint {
	var ready, terminating []endpoint
	for _, e := range eps {
		if !keep(e) {
			continue
		}
		if e.ready {
			ready = append(ready, e)
		} else if e.serving && e.terminating {
			terminating = append(terminating, e)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// chainName is upstream's naming: a prefix, a hash of the base that keeps names unique
// whatever the base contains, then the readable base.
func chainName(prefix, base string) string {
	sum := sha256.Sum256([]byte(base))
	hash := base32.StdEncoding.EncodeToString(sum[:])[:8]
	return prefix + "-" + hash + "-" + base
}

func (b *builder) addServicePort(sp servicePort) {
	clusterEPs := usable(sp.endpoints, func(endpoint) bool { return true })
	localEPs := usable(sp.endpoints, func(e endpoint) bool { return e.nodeName == b.in.NodeName })
	hasAny := len(clusterEPs) > 0
	hasExternal := sp.nodePort != 0 || len(sp.externalIPs) > 0

	serviceChain := chainName("service", sp.base)
	localChain := chainName("local", sp.base)
	externalChain := chainName("external", sp.base)

	// One chain per endpoint in use: hairpin traffic is masqueraded, the client is
	// remembered when the service has affinity, then DNAT.
	endpointChains := map[netip.AddrPort]string{}
	affinitySet := func(e endpoint) string {
		return chainName("affinity", sp.base+"__"+e.addr.String()+"/"+fmt.Sprint(e.port))
	}
	addEndpointChains := func(eps []endpoint) []string {
		var names []string
		for _, e := range eps {
			ap := netip.AddrPortFrom(e.addr, e.port)
			name, ok := endpointChains[ap]
			if !ok {
				name = chainName("endpoint", sp.base+"__"+e.addr.String()+"/"+fmt.Sprint(e.port))
				endpointChains[ap] = name
				rules := []Rule{{MatchAddr{Source: true, Prefix: netip.PrefixFrom(e.addr, 32)}, Verdict{Kind: Jump, Chain: chainMarkForMasq}}}
				if sp.affinity > 0 {
					b.affinitySets = append(b.affinitySets, Set{Name: affinitySet(e), Type: KeyAddr, Timeout: sp.affinity})
					rules = append(rules, Rule{UpdateSet{affinitySet(e)}})
				}
				rules = append(rules, Rule{MatchProto{sp.proto}, DNAT{Addr: e.addr, Port: e.port}})
				b.chains = append(b.chains, Chain{Name: name, Rules: rules})
			}
			names = append(names, name)
		}
		return names
	}
	// pick sends a client with affinity back to its endpoint, others to a random one.
	pick := func(eps []endpoint) []Rule {
		chains := addEndpointChains(eps)
		var rules []Rule
		if sp.affinity > 0 {
			for i, e := range eps {
				rules = append(rules, Rule{MatchSaddrSet{affinitySet(e)}, Verdict{Kind: Goto, Chain: chains[i]}})
			}
		}
		return append(rules, Rule{RandomGoto{Chains: chains}})
	}

	// The cluster policy chain: masquerade off-cluster traffic to the ClusterIP, then
	// pick any usable endpoint.
	usesServiceChain := hasAny && (!sp.internalLocal || hasExternal)
	if usesServiceChain {
		var rules []Rule
		toClusterIP := Rule{MatchAddr{Prefix: netip.PrefixFrom(sp.clusterIP, 32)}, MatchPort{sp.proto, sp.port}}
		switch {
		case b.in.MasqueradeAll:
			rules = append(rules, append(toClusterIP, Verdict{Kind: Jump, Chain: chainMarkForMasq}))
		case b.in.ClusterCIDR.IsValid():
			rules = append(rules, append(toClusterIP, MatchAddr{Source: true, Prefix: b.in.ClusterCIDR, Negate: true},
				Verdict{Kind: Jump, Chain: chainMarkForMasq}))
		}
		rules = append(rules, pick(clusterEPs)...)
		b.chains = append(b.chains, Chain{Name: serviceChain, Rules: rules})
	}
	// The local policy chain: only this node's endpoints, sources kept.
	usesLocalChain := len(localEPs) > 0 && (sp.internalLocal || (hasExternal && sp.externalLocal))
	if usesLocalChain {
		b.chains = append(b.chains, Chain{Name: localChain, Rules: pick(localEPs)})
	}

	// ClusterIP: to its policy's chain, or refused. A service with no endpoints at all
	// rejects; one whose policy leaves no endpoint for this node drops, as upstream.
	clusterKey := Key{Addr: sp.clusterIP, Proto: sp.proto, Port: sp.port}
	switch {
	case sp.internalLocal && usesLocalChain:
		b.serviceIPs = append(b.serviceIPs, MapElement{clusterKey, Verdict{Kind: Goto, Chain: localChain}})
	case !sp.internalLocal && usesServiceChain:
		b.serviceIPs = append(b.serviceIPs, MapElement{clusterKey, Verdict{Kind: Goto, Chain: serviceChain}})
	default:
		b.noEPServices = append(b.noEPServices, MapElement{clusterKey, refusal(hasAny)})
	}
	if !hasExternal {
		return
	}

	// External destinations (NodePort, externalIPs, load balancer IPs) go through the
	// external chain: masqueraded under the Cluster policy; under Local, sources are
	// kept, except that pods and the node itself are sent to the cluster policy.
	externalHasEndpoints := hasAny
	if sp.externalLocal {
		externalHasEndpoints = usesLocalChain
	}
	if externalHasEndpoints {
		var rules []Rule
		if !sp.externalLocal {
			rules = []Rule{
				{Verdict{Kind: Jump, Chain: chainMarkForMasq}},
				{Verdict{Kind: Goto, Chain: serviceChain}},
			}
		} else {
			if b.in.ClusterCIDR.IsValid() {
				rules = append(rules, Rule{MatchAddr{Source: true, Prefix: b.in.ClusterCIDR}, Verdict{Kind: Goto, Chain: serviceChain}})
			}
			rules = append(rules,
				Rule{MatchFibLocal{Source: true}, Verdict{Kind: Jump, Chain: chainMarkForMasq}},
				Rule{MatchFibLocal{Source: true}, Verdict{Kind: Goto, Chain: serviceChain}},
				Rule{Verdict{Kind: Goto, Chain: localChain}})
		}
		b.chains = append(b.chains, Chain{Name: externalChain, Rules: rules})
	}
	// loadBalancerSourceRanges: new connections to the load balancer IPs from
	// elsewhere are dropped before anything else happens to them.
	if len(sp.sourceRanges) > 0 && len(sp.lbIPs) > 0 {
		firewallChain := chainName("firewall", sp.base)
		var rules []Rule
		for _, r := range sp.sourceRanges {
			rules = append(rules, Rule{MatchAddr{Source: true, Prefix: r}, Verdict{Kind: Return}})
		}
		b.chains = append(b.chains, Chain{Name: firewallChain, Rules: append(rules, Rule{Verdict{Kind: Drop}})})
		for _, ip := range sp.lbIPs {
			b.firewallIPs = append(b.firewallIPs, MapElement{Key{Addr: ip, Proto: sp.proto, Port: sp.port}, Verdict{Kind: Goto, Chain: firewallChain}})
		}
	}
	toExternal := Verdict{Kind: Goto, Chain: externalChain}
	for _, ip := range sp.externalIPs {
		k := Key{Addr: ip, Proto: sp.proto, Port: sp.port}
		if externalHasEndpoints {
			b.serviceIPs = append(b.serviceIPs, MapElement{k, toExternal})
		} else {
			b.noEPServices = append(b.noEPServices, MapElement{k, refusal(hasAny)})
		}
	}
	if sp.nodePort != 0 {
		k := Key{Proto: sp.proto, Port: sp.nodePort}
		if externalHasEndpoints {
			b.nodePorts = append(b.nodePorts, MapElement{k, toExternal})
		} else {
			b.noEPNodePorts = append(b.noEPNodePorts, MapElement{k, refusal(hasAny)})
		}
	}
}

// refusal is what happens to new connections to a destination without endpoints to
// use: rejected when the service has none at all, dropped when it has some elsewhere.
func refusal(hasAny bool) Verdict {
	if hasAny {
		return Verdict{Kind: Drop}
	}
	return Verdict{Kind: Goto, Chain: chainReject}
}

// ruleset assembles the fixed skeleton around the per-service parts.
func (b *builder) ruleset() *Ruleset {
	ctNew := func(chain string) Rule { return Rule{MatchCtNew{}, Verdict{Kind: Jump, Chain: chain}} }
	base := func(name, typ, hook string, prio int, rules ...Rule) Chain {
		return Chain{Name: name, Hook: &Hook{Type: typ, Hook: hook, Priority: prio}, Rules: rules}
	}
	// Which destinations NodePorts answer on.
	nodePortDests := Rule{MatchDaddrSet{setNodePortIPs}}
	if b.in.NodePortOnAllLocal {
		nodePortDests = Rule{MatchFibLocal{}, MatchAddr{Prefix: netip.MustParsePrefix("127.0.0.0/8"), Negate: true}}
	}
	vmap := func(dests Rule, m string, t KeyType) Rule {
		return append(append(Rule{}, dests...), VmapLookup{Map: m, Type: t})
	}
	chains := []Chain{
		base("filter-prerouting", "filter", "prerouting", -110, ctNew(chainFirewallCheck)),
		base("filter-input", "filter", "input", -110, ctNew(chainNodePortEPCheck), ctNew(chainServiceEPCheck)),
		base("filter-forward", "filter", "forward", -110, ctNew(chainServiceEPCheck), ctNew(chainClusterIPsCheck)),
		base("filter-output", "filter", "output", -110, ctNew(chainServiceEPCheck), ctNew(chainFirewallCheck)),
		base("filter-output-post-dnat", "filter", "output", -90, ctNew(chainClusterIPsCheck)),
		base("nat-prerouting", "nat", "prerouting", -100, Rule{Verdict{Kind: Jump, Chain: chainServices}}),
		base("nat-output", "nat", "output", -100, Rule{Verdict{Kind: Jump, Chain: chainServices}}),
		base("nat-postrouting", "nat", "postrouting", 100, Rule{Verdict{Kind: Jump, Chain: chainMasquerading}}),
		{Name: chainClusterIPsCheck, Rules: []Rule{{MatchDaddrSet{setClusterIPs}, Verdict{Kind: Reject}}}},
		{Name: chainFirewallCheck, Rules: []Rule{vmap(nil, mapFirewallIPs, KeyAddrProtoPort)}},
		{Name: chainMarkForMasq, Rules: []Rule{{SetMark{}}}},
		{Name: chainMasquerading, Rules: []Rule{
			{MatchMarkUnset{}, Verdict{Kind: Return}},
			{ClearMark{}},
			{Masquerade{}},
		}},
		{Name: chainNodePortEPCheck, Rules: []Rule{vmap(nodePortDests, mapNoEndpointNodePort, KeyProtoPort)}},
		{Name: chainReject, Rules: []Rule{{Verdict{Kind: Reject}}}},
		{Name: chainServiceEPCheck, Rules: []Rule{vmap(nil, mapNoEndpointServices, KeyAddrProtoPort)}},
		{Name: chainServices, Rules: []Rule{
			vmap(nil, mapServiceIPs, KeyAddrProtoPort),
			vmap(nodePortDests, mapServiceNodePorts, KeyProtoPort),
		}},
	}
	perService := append([]Chain(nil), b.chains...)
	sort.SliceStable(perService, func(i, j int) bool { return perService[i].Name < perService[j].Name })
	rs := &Ruleset{Chains: append(chains, perService...)}

	clusterIPs := Set{Name: setClusterIPs, Type: KeyAddr}
	for ip := range b.clusterIPs {
		clusterIPs.Elements = append(clusterIPs.Elements, Key{Addr: ip})
	}
	sortKeys(clusterIPs.Elements)
	nodePortIPs := Set{Name: setNodePortIPs, Type: KeyAddr}
	if !b.in.NodePortOnAllLocal {
		for _, ip := range b.in.NodePortAddresses {
			if ip.Is4() {
				nodePortIPs.Elements = append(nodePortIPs.Elements, Key{Addr: ip})
			}
		}
		sortKeys(nodePortIPs.Elements)
	}
	affinity := append([]Set(nil), b.affinitySets...)
	sort.Slice(affinity, func(i, j int) bool { return affinity[i].Name < affinity[j].Name })
	rs.Sets = append([]Set{clusterIPs, nodePortIPs}, affinity...)
	rs.Maps = []Map{
		{Name: mapFirewallIPs, Type: KeyAddrProtoPort, Elements: sortedElements(b.firewallIPs)},
		{Name: mapNoEndpointNodePort, Type: KeyProtoPort, Elements: sortedElements(b.noEPNodePorts)},
		{Name: mapNoEndpointServices, Type: KeyAddrProtoPort, Elements: sortedElements(b.noEPServices)},
		{Name: mapServiceIPs, Type: KeyAddrProtoPort, Elements: sortedElements(b.serviceIPs)},
		{Name: mapServiceNodePorts, Type: KeyProtoPort, Elements: sortedElements(b.nodePorts)},
	}
	return rs
}

func keyLess(a, b Key) bool {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c < 0
	}
	if a.Proto != b.Proto {
		return a.Proto < b.Proto
	}
	return a.Port < b.Port
}

func sortKeys(keys []Key) {
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
}

// sortedElements orders map elements by key and keeps the first of duplicates: two
// services claiming one external IP and port must not make the whole batch fail.
func sortedElements(elems []MapElement) []MapElement {
	sort.SliceStable(elems, func(i, j int) bool { return keyLess(elems[i].Key, elems[j].Key) })
	var out []MapElement
	for i, e := range elems {
		if i > 0 && e.Key == elems[i-1].Key {
			continue
		}
		out = append(out, e)
	}
	return out
}
