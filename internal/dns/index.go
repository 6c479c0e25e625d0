package dns

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// objKey names a namespaced object.
type objKey struct{ namespace, name string }

// serviceInfo is what DNS needs of a Service. It is replaced, never mutated, on update.
type serviceInfo struct {
	headless        bool
	externalName    string // fully qualified CNAME target of an ExternalName service
	clusterIPs      []netip.Addr
	ports           []portInfo
	publishNotReady bool
}

type portInfo struct {
	name     string // lower-case; "" for an unnamed port
	protocol string // lower-case: tcp, udp, sctp
	port     uint16
}

// sliceInfo is what DNS needs of an EndpointSlice.
type sliceInfo struct {
	service   string
	endpoints []endpointInfo
	ports     []portInfo
}

type endpointInfo struct {
	addr     netip.Addr
	hostname string // lower-case; "" when the endpoint has none
	ready    bool
}

// node holds the records of one name. Nodes are built whole and never mutated once
// published in the index, so a reader may keep one after releasing the lock.
type node struct {
	addrs []netip.Addr // A and AAAA
	cname string       // ExternalName target
	srv   []srvRecord
}

type srvRecord struct {
	target string
	port   uint16
}

// ptrOwner is one claim on a reverse name: a service's cluster IP or one of its endpoints.
type ptrOwner struct {
	service   objKey
	target    string
	clusterIP bool
}

// owned lists what one service put in the index, so that a rebuild removes exactly that.
type owned struct {
	names []string
	addrs []netip.Addr
}

// index is the cluster's DNS data: the objects informers report, and the records derived
// from them, by name and by address. Records of a service are rebuilt whenever the service
// or one of its EndpointSlices changes, so a query is a map lookup.
type index struct {
	zone string // lower-case, fully qualified

	mu         sync.RWMutex
	namespaces map[string]struct{}
	services   map[objKey]*serviceInfo
	slices     map[objKey]map[string]*sliceInfo // by service, then slice name
	sliceOwner map[objKey]string                // the service each slice serves, by slice
	names      map[string]*node
	reverse    map[netip.Addr][]ptrOwner
	owned      map[objKey]owned
	serial     uint32
}

func newIndex(zone string) *index {
	return &index{
		zone:       zone,
		namespaces: map[string]struct{}{},
		services:   map[objKey]*serviceInfo{},
		slices:     map[objKey]map[string]*sliceInfo{},
		sliceOwner: map[objKey]string{},
		names:      map[string]*node{},
		reverse:    map[netip.Addr][]ptrOwner{},
		owned:      map[objKey]owned{},
		serial:     uint32(time.Now().Unix()),
	}
}

func (x *index) setNamespace(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.namespaces[name] = struct{}{}
	x.touch()
}

func (x *index) deleteNamespace(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.namespaces, name)
	x.touch()
}

func (x *index) setService(svc *v1.Service) {
	key := objKey{svc.Namespace, svc.Name}
	info := serviceInfoOf(svc)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.services[key] = info
	x.rebuild(key)
}

func (x *index) deleteService(namespace, name string) {
	key := objKey{namespace, name}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.services, key)
	x.rebuild(key)
}

func (x *index) setSlice(slice *discoveryv1.EndpointSlice) {
	info := sliceInfoOf(slice)
	key := objKey{slice.Namespace, slice.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	// A slice relabelled to another service leaves the one it served.
	if prev, ok := x.sliceOwner[key]; ok && prev != info.service {
		x.dropSlice(key, prev)
	}
	if info.service == "" {
		return
	}
	svc := objKey{slice.Namespace, info.service}
	if x.slices[svc] == nil {
		x.slices[svc] = map[string]*sliceInfo{}
	}
	x.slices[svc][slice.Name] = info
	x.sliceOwner[key] = info.service
	x.rebuild(svc)
}

func (x *index) deleteSlice(namespace, name string) {
	key := objKey{namespace, name}
	x.mu.Lock()
	defer x.mu.Unlock()
	if service, ok := x.sliceOwner[key]; ok {
		x.dropSlice(key, service)
	}
}

// dropSlice removes a slice from the service it served; called with the lock held.
func (x *index) dropSlice(key objKey, service string) {
	svc := objKey{key.namespace, service}
	delete(x.sliceOwner, key)
	if byName := x.slices[svc]; byName != nil {
		delete(byName, key.name)
		if len(byName) == 0 {
			delete(x.slices, svc)
		}
	}
	x.rebuild(svc)
}

// touch moves the SOA serial forward; called with the lock held.
func (x *index) touch() {
	if now := uint32(time.Now().Unix()); now > x.serial {
		x.serial = now
	} else {
		x.serial++
	}
}

// rebuild replaces the records of one service; called with the lock held.
func (x *index) rebuild(key objKey) {
	x.touch()
	old := x.owned[key]
	for _, name := range old.names {
		delete(x.names, name)
	}
	for _, a := range old.addrs {
		owners := slices.DeleteFunc(x.reverse[a], func(o ptrOwner) bool { return o.service == key })
		if len(owners) == 0 {
			delete(x.reverse, a)
		} else {
			x.reverse[a] = owners
		}
	}
	delete(x.owned, key)

	svc := x.services[key]
	if svc == nil {
		return
	}
	nodes, ptrs := buildRecords(key, svc, x.slices[key], x.zone)
	var own owned
	for name, n := range nodes {
		x.names[name] = n
		own.names = append(own.names, name)
	}
	for _, p := range ptrs {
		x.reverse[p.addr] = append(x.reverse[p.addr], p.owner)
		own.addrs = append(own.addrs, p.addr)
	}
	x.owned[key] = own
}

type ptrClaim struct {
	addr  netip.Addr
	owner ptrOwner
}

// buildRecords derives every name a service owns, following the Kubernetes DNS
// specification as CoreDNS's kubernetes plugin answers it.
func buildRecords(key objKey, svc *serviceInfo, sliceSet map[string]*sliceInfo, zone string) (map[string]*node, []ptrClaim) {
	base := key.name + "." + key.namespace + ".svc." + zone
	nodes := map[string]*node{}
	at := func(name string) *node {
		n := nodes[name]
		if n == nil {
			n = &node{}
			nodes[name] = n
		}
		return n
	}
	var ptrs []ptrClaim

	if svc.externalName != "" {
		at(base).cname = svc.externalName
		return nodes, nil
	}
	if !svc.headless && len(svc.clusterIPs) > 0 {
		n := at(base)
		n.addrs = append(n.addrs, svc.clusterIPs...)
		for _, p := range svc.ports {
			n.srv = append(n.srv, srvRecord{target: base, port: p.port})
			if p.name != "" {
				pn := at("_" + p.name + "._" + p.protocol + "." + base)
				pn.addrs = append(pn.addrs, svc.clusterIPs...)
				pn.srv = append(pn.srv, srvRecord{target: base, port: p.port})
			}
		}
		for _, a := range svc.clusterIPs {
			ptrs = append(ptrs, ptrClaim{a, ptrOwner{service: key, target: base, clusterIP: true}})
		}
	}

	// Endpoints get names for every service kind but ExternalName; a headless service's
	// own name answers with them.
	sliceNames := make([]string, 0, len(sliceSet))
	for name := range sliceSet {
		sliceNames = append(sliceNames, name)
	}
	slices.Sort(sliceNames)
	for _, sliceName := range sliceNames {
		sl := sliceSet[sliceName]
		for _, ep := range sl.endpoints {
			if !ep.ready && !svc.publishNotReady {
				continue
			}
			host := ep.hostname
			if host == "" {
				host = dashedAddr(ep.addr)
			}
			epName := host + "." + base
			en := at(epName)
			en.addrs = append(en.addrs, ep.addr)
			ptrs = append(ptrs, ptrClaim{ep.addr, ptrOwner{service: key, target: epName}})
			if svc.headless {
				at(base).addrs = append(at(base).addrs, ep.addr)
			}
			for _, p := range sl.ports {
				en.srv = append(en.srv, srvRecord{target: epName, port: p.port})
				if !svc.headless {
					continue
				}
				at(base).srv = append(at(base).srv, srvRecord{target: epName, port: p.port})
				if p.name != "" {
					pn := at("_" + p.name + "._" + p.protocol + "." + base)
					pn.addrs = append(pn.addrs, ep.addr)
					pn.srv = append(pn.srv, srvRecord{target: epName, port: p.port})
				}
			}
		}
	}

	for _, n := range nodes {
		slices.SortFunc(n.addrs, netip.Addr.Compare)
		n.addrs = slices.Compact(n.addrs)
		slices.SortFunc(n.srv, func(a, b srvRecord) int {
			return cmp.Or(strings.Compare(a.target, b.target), cmp.Compare(a.port, b.port))
		})
		n.srv = slices.Compact(n.srv)
		n.addrs = slices.Clip(n.addrs)
		n.srv = slices.Clip(n.srv)
	}
	return nodes, ptrs
}

// lookup returns the records of a name, nil when it has none.
func (x *index) lookup(name string) *node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.names[name]
}

// namespaceExists reports whether the namespace exists.
func (x *index) namespaceExists(name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.namespaces[name]
	return ok
}

// clusterIPs returns the cluster IPs of a service; the slice must not be modified.
func (x *index) clusterIPs(namespace, name string) []netip.Addr {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if svc := x.services[objKey{namespace, name}]; svc != nil && !svc.headless {
		return svc.clusterIPs
	}
	return nil
}

// ptrTargets returns the names an address points back to: the service whose cluster
// IP it is if there is one, otherwise every endpoint name that has it.
func (x *index) ptrTargets(a netip.Addr) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	owners := x.reverse[a]
	var svcTarget string
	var targets []string
	for _, o := range owners {
		if o.clusterIP {
			if svcTarget == "" || o.target < svcTarget {
				svcTarget = o.target
			}
			continue
		}
		targets = append(targets, o.target)
	}
	if svcTarget != "" {
		return []string{svcTarget}
	}
	slices.Sort(targets)
	return slices.Compact(targets)
}

// soaSerial is the SOA serial: it moves forward on every change.
func (x *index) soaSerial() uint32 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.serial
}

// serviceInfoOf keeps what DNS needs of a Service.
func serviceInfoOf(svc *v1.Service) *serviceInfo {
	info := &serviceInfo{publishNotReady: svc.Spec.PublishNotReadyAddresses}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		target := strings.ToLower(svc.Spec.ExternalName)
		// CoreDNS gives no record for an ExternalName that is an address.
		if _, err := netip.ParseAddr(target); err != nil && target != "" {
			if !strings.HasSuffix(target, ".") {
				target += "."
			}
			info.externalName = target
		}
		return info
	}
	if svc.Spec.ClusterIP == v1.ClusterIPNone {
		info.headless = true
	} else {
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, s := range ips {
			if a, err := netip.ParseAddr(s); err == nil {
				info.clusterIPs = append(info.clusterIPs, a.Unmap())
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		info.ports = append(info.ports, portInfo{
			name:     strings.ToLower(p.Name),
			protocol: protocolLabel(string(p.Protocol)),
			port:     uint16(p.Port),
		})
	}
	return info
}

// sliceInfoOf keeps what DNS needs of an EndpointSlice; FQDN slices give no records.
func sliceInfoOf(slice *discoveryv1.EndpointSlice) *sliceInfo {
	info := &sliceInfo{service: slice.Labels[discoveryv1.LabelServiceName]}
	if slice.AddressType == discoveryv1.AddressTypeFQDN {
		return info
	}
	for _, p := range slice.Ports {
		if p.Port == nil {
			continue
		}
		pi := portInfo{port: uint16(*p.Port), protocol: "tcp"}
		if p.Name != nil {
			pi.name = strings.ToLower(*p.Name)
		}
		if p.Protocol != nil {
			pi.protocol = protocolLabel(string(*p.Protocol))
		}
		info.ports = append(info.ports, pi)
	}
	for _, ep := range slice.Endpoints {
		// A nil ready condition means ready, as the EndpointSlice API says.
		ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
		var hostname string
		if ep.Hostname != nil {
			hostname = strings.ToLower(*ep.Hostname)
		}
		for _, s := range ep.Addresses {
			if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
				info.endpoints = append(info.endpoints, endpointInfo{addr: a.Unmap(), hostname: hostname, ready: ready})
			}
		}
	}
	return info
}

func protocolLabel(p string) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(p)
}
