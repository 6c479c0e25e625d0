package endpointslice

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/controller/util"
)

// endpointGroup is the endpoints that share one address type and one port list, and
// so may share slices.
type endpointGroup struct {
	addressType discovery.AddressType
	ports       []discovery.EndpointPort
	endpoints   map[string]discovery.Endpoint // by endpointID
}

// plan is the set of writes that brings a service's slices to the desired state.
type plan struct {
	creates, updates, deletes []*discovery.EndpointSlice
	triggerTime               time.Time
}

func endpointID(e discovery.Endpoint) string {
	id := strings.Join(e.Addresses, ",")
	if e.TargetRef != nil {
		id += "/" + e.TargetRef.Namespace + "/" + e.TargetRef.Name + "/" + string(e.TargetRef.UID)
	}
	return id
}

func portsKey(ports []discovery.EndpointPort) string {
	var keys []string
	for _, p := range ports {
		k := fmt.Sprintf("%s/%d/%s", deref(p.Name), deref(p.Port), deref(p.Protocol))
		if p.AppProtocol != nil {
			k += "/" + *p.AppProtocol
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

func groupKey(t discovery.AddressType, ports []discovery.EndpointPort) string {
	return string(t) + "|" + portsKey(ports)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// addressTypes are the families the service serves, from spec.ipFamilies (IPv4 when
// unset, as the apiserver defaults it).
func addressTypes(svc *corev1.Service) []discovery.AddressType {
	var out []discovery.AddressType
	for _, f := range svc.Spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			out = append(out, discovery.AddressTypeIPv6)
		} else {
			out = append(out, discovery.AddressTypeIPv4)
		}
	}
	if len(out) == 0 {
		if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && ip.Is6() {
			return []discovery.AddressType{discovery.AddressTypeIPv6}
		}
		out = []discovery.AddressType{discovery.AddressTypeIPv4}
	}
	return out
}

func podIPs(pod *corev1.Pod) []string {
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []string{pod.Status.PodIP}
	}
	return ips
}

func familyOf(ip string) (discovery.AddressType, bool) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", false
	}
	if a.Is4() {
		return discovery.AddressTypeIPv4, true
	}
	return discovery.AddressTypeIPv6, true
}

// desiredEndpoints turns the selected pods into endpoint groups.
func (c *Controller) desiredEndpoints(svc *corev1.Service, pods []*corev1.Pod) map[string]*endpointGroup {
	families := addressTypes(svc)
	headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
	groups := map[string]*endpointGroup{}
	for _, pod := range pods {
		if !util.PodServesEndpoints(pod) {
			continue
		}
		var ports []discovery.EndpointPort
		for _, sp := range svc.Spec.Ports {
			port, ok := util.TargetPortOf(pod, sp)
			if !ok {
				continue
			}
			ports = append(ports, discovery.EndpointPort{Name: ptr(sp.Name), Port: ptr(port), Protocol: ptr(sp.Protocol), AppProtocol: sp.AppProtocol})
		}
		if len(ports) == 0 && !(headless && len(svc.Spec.Ports) == 0) {
			continue
		}
		slices.SortFunc(ports, func(a, b discovery.EndpointPort) int {
			return strings.Compare(portsKey([]discovery.EndpointPort{a}), portsKey([]discovery.EndpointPort{b}))
		})
		for _, ip := range podIPs(pod) {
			family, ok := familyOf(ip)
			if !ok || !slices.Contains(families, family) {
				continue
			}
			ep := c.podEndpoint(svc, pod, ip)
			k := groupKey(family, ports)
			g := groups[k]
			if g == nil {
				g = &endpointGroup{addressType: family, ports: ports, endpoints: map[string]discovery.Endpoint{}}
				groups[k] = g
			}
			g.endpoints[endpointID(ep)] = ep
		}
	}
	return groups
}

func (c *Controller) podEndpoint(svc *corev1.Service, pod *corev1.Pod, ip string) discovery.Endpoint {
	serving := util.IsPodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discovery.Endpoint{
		Addresses:  []string{ip},
		Conditions: discovery.EndpointConditions{Ready: ptr(ready), Serving: ptr(serving), Terminating: ptr(terminating)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		ep.NodeName = ptr(pod.Spec.NodeName)
		if node, err := c.nodes.Get(pod.Spec.NodeName); err == nil {
			if zone, ok := node.Labels[corev1.LabelTopologyZone]; ok {
				ep.Zone = ptr(zone)
			}
		}
	}
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && svc.Namespace == pod.Namespace {
		ep.Hostname = ptr(pod.Spec.Hostname)
	}
	return ep
}

func ptr[T any](v T) *T { return &v }

// sliceLabels are the service's labels plus the ones that tie a slice to it.
func sliceLabels(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Labels)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, headlessLabel)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		out[headlessLabel] = ""
	}
	out[discovery.LabelServiceName] = svc.Name
	out[discovery.LabelManagedBy] = ManagedBy
	return out
}

func newSlice(svc *corev1.Service, t discovery.AddressType, ports []discovery.EndpointPort) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: svc.Name + "-",
			Namespace:    svc.Namespace,
			Labels:       sliceLabels(svc),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		AddressType: t,
		Ports:       ports,
		Endpoints:   []discovery.Endpoint{},
	}
}

func sortEndpoints(eps []discovery.Endpoint) {
	slices.SortFunc(eps, func(a, b discovery.Endpoint) int { return strings.Compare(endpointID(a), endpointID(b)) })
}

// reconcile plans the writes that turn existing slices into desired ones while moving
// as few endpoints as possible: endpoints stay in the slice that holds them, new ones
// fill slices with room before new slices are made, and emptied slices are deleted.
// A service with no endpoints at all keeps one empty placeholder slice, as upstream.
func reconcile(svc *corev1.Service, desired map[string]*endpointGroup, existing []*discovery.EndpointSlice, maxPer int) *plan {
	p := &plan{}
	existing = slices.Clone(existing)
	slices.SortFunc(existing, func(a, b *discovery.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })

	if len(desired) == 0 {
		keep := -1
		for i, s := range existing {
			if len(s.Endpoints) == 0 && len(s.Ports) == 0 && s.AddressType == addressTypes(svc)[0] {
				keep = i
				break
			}
		}
		for i, s := range existing {
			if i == keep {
				if updated, changed := withContent(svc, s, nil); changed {
					p.updates = append(p.updates, updated)
				}
				continue
			}
			p.deletes = append(p.deletes, s)
		}
		if keep < 0 {
			p.creates = append(p.creates, newSlice(svc, addressTypes(svc)[0], []discovery.EndpointPort{}))
		}
		return p
	}

	type kept struct {
		old *discovery.EndpointSlice
		eps []discovery.Endpoint
	}
	keptByGroup := map[string][]*kept{}
	placed := map[string]map[string]bool{}
	for _, s := range existing {
		k := groupKey(s.AddressType, s.Ports)
		g := desired[k]
		if g == nil {
			p.deletes = append(p.deletes, s)
			continue
		}
		if placed[k] == nil {
			placed[k] = map[string]bool{}
		}
		ks := &kept{old: s}
		for _, e := range s.Endpoints {
			id := endpointID(e)
			if want, ok := g.endpoints[id]; ok && !placed[k][id] && len(ks.eps) < maxPer {
				ks.eps = append(ks.eps, want)
				placed[k][id] = true
			}
		}
		keptByGroup[k] = append(keptByGroup[k], ks)
	}

	for _, k := range slices.Sorted(maps.Keys(desired)) {
		g := desired[k]
		var unplaced []discovery.Endpoint
		for id, e := range g.endpoints {
			if !placed[k][id] {
				unplaced = append(unplaced, e)
			}
		}
		sortEndpoints(unplaced)
		for _, ks := range keptByGroup[k] {
			room := min(maxPer-len(ks.eps), len(unplaced))
			ks.eps = append(ks.eps, unplaced[:room]...)
			unplaced = unplaced[room:]
		}
		for _, ks := range keptByGroup[k] {
			if len(ks.eps) == 0 {
				p.deletes = append(p.deletes, ks.old)
				continue
			}
			if updated, changed := withContent(svc, ks.old, ks.eps); changed {
				p.updates = append(p.updates, updated)
			}
		}
		for len(unplaced) > 0 {
			n := min(maxPer, len(unplaced))
			s := newSlice(svc, g.addressType, g.ports)
			s.Endpoints = slices.Clone(unplaced[:n])
			sortEndpoints(s.Endpoints)
			p.creates = append(p.creates, s)
			unplaced = unplaced[n:]
		}
	}
	return p
}

// withContent returns old with the given endpoints, the service's labels and owner, and
// whether that differs from old.
func withContent(svc *corev1.Service, old *discovery.EndpointSlice, eps []discovery.Endpoint) (*discovery.EndpointSlice, bool) {
	eps = slices.Clone(eps)
	if eps == nil {
		eps = []discovery.Endpoint{}
	}
	sortEndpoints(eps)
	oldEps := slices.Clone(old.Endpoints)
	sortEndpoints(oldEps)
	wantLabels := sliceLabels(svc)
	owned := slices.ContainsFunc(old.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == svc.UID })
	if apiequality.Semantic.DeepEqual(oldEps, eps) && maps.Equal(old.Labels, wantLabels) && owned {
		return old, false
	}
	s := old.DeepCopy()
	s.Endpoints = eps
	s.Labels = wantLabels
	if !owned {
		s.OwnerReferences = newSlice(svc, s.AddressType, nil).OwnerReferences
	}
	return s, true
}
