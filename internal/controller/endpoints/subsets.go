package endpoints

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// subsetBuilder groups addresses by the exact set of ports they serve, the canonical
// packed form of Endpoints subsets: each address appears once per subset, ready
// winning over not ready.
type subsetBuilder struct {
	byAddress map[string]*addressPorts // address identity -> its ports
	order     []string
}

type addressPorts struct {
	addr  corev1.EndpointAddress
	ready bool
	ports []corev1.EndpointPort
}

func addressID(a corev1.EndpointAddress) string {
	if a.TargetRef != nil {
		return a.IP + "/" + string(a.TargetRef.UID) + "/" + a.TargetRef.Name
	}
	return a.IP
}

func (b *subsetBuilder) add(ports []corev1.EndpointPort, addr corev1.EndpointAddress, ready bool) {
	if b.byAddress == nil {
		b.byAddress = map[string]*addressPorts{}
	}
	id := addressID(addr)
	ap, ok := b.byAddress[id]
	if !ok {
		ap = &addressPorts{addr: addr, ready: ready}
		b.byAddress[id] = ap
		b.order = append(b.order, id)
	}
	ap.ports = append(ap.ports, ports...)
}

func portKey(p corev1.EndpointPort) string {
	return fmt.Sprintf("%s/%d/%s", p.Name, p.Port, p.Protocol)
}

// build returns subsets sorted deterministically, keeping at most limit addresses.
func (b *subsetBuilder) build(limit int) ([]corev1.EndpointSubset, bool) {
	type group struct {
		ports           []corev1.EndpointPort
		ready, notReady []corev1.EndpointAddress
	}
	groups := map[string]*group{}
	for _, id := range b.order {
		ap := b.byAddress[id]
		ports := slices.Clone(ap.ports)
		slices.SortFunc(ports, func(x, y corev1.EndpointPort) int { return strings.Compare(portKey(x), portKey(y)) })
		ports = slices.CompactFunc(ports, func(x, y corev1.EndpointPort) bool { return portKey(x) == portKey(y) })
		var keys []string
		for _, p := range ports {
			keys = append(keys, portKey(p))
		}
		k := strings.Join(keys, ",")
		g, ok := groups[k]
		if !ok {
			g = &group{ports: ports}
			groups[k] = g
		}
		if ap.ready {
			g.ready = append(g.ready, ap.addr)
		} else {
			g.notReady = append(g.notReady, ap.addr)
		}
	}
	keys := slices.Sorted(maps.Keys(groups))
	var out []corev1.EndpointSubset
	remaining, truncated := limit, false
	for _, k := range keys {
		g := groups[k]
		sortAddresses(g.ready)
		sortAddresses(g.notReady)
		if len(g.ready) > remaining {
			g.ready, truncated = g.ready[:remaining], true
		}
		remaining -= len(g.ready)
		if len(g.notReady) > remaining {
			g.notReady, truncated = g.notReady[:remaining], true
		}
		remaining -= len(g.notReady)
		if len(g.ready)+len(g.notReady) == 0 {
			continue
		}
		out = append(out, corev1.EndpointSubset{Addresses: g.ready, NotReadyAddresses: g.notReady, Ports: g.ports})
	}
	return out, truncated
}

func sortAddresses(a []corev1.EndpointAddress) {
	slices.SortFunc(a, func(x, y corev1.EndpointAddress) int {
		return cmp.Compare(addressID(x), addressID(y))
	})
}

// normalize puts stored subsets into build's canonical form so they compare equal to
// freshly computed ones regardless of how they were written.
func normalize(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	var b subsetBuilder
	total := 0
	for _, s := range subsets {
		for _, a := range s.Addresses {
			b.add(s.Ports, a, true)
			total++
		}
		for _, a := range s.NotReadyAddresses {
			b.add(s.Ports, a, false)
			total++
		}
	}
	out, _ := b.build(total)
	return out
}
