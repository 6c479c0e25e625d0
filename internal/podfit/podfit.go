// Package podfit holds what the scheduler and a kubelet's admission both check a pod
// against a node by: the host ports its containers take, and which resource names are
// extended resources. Upstream's kubelet admission runs the scheduler's own predicates;
// here the two share these pieces instead of the kubelet importing the scheduler.
package podfit

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// HostPorts are the ports a pod's containers take on the node.
func HostPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// ProtocolPort is a host port with its protocol.
type ProtocolPort struct {
	Protocol string
	Port     int32
}

// HostPortInfo records host ports in use on a node, per host IP.
type HostPortInfo map[string]map[ProtocolPort]struct{}

func sanitize(ip, protocol string) (string, string) {
	if ip == "" {
		ip = "0.0.0.0"
	}
	if protocol == "" {
		protocol = string(v1.ProtocolTCP)
	}
	return ip, protocol
}

// Add records a port.
func (h HostPortInfo) Add(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitize(ip, protocol)
	if h[ip] == nil {
		h[ip] = map[ProtocolPort]struct{}{}
	}
	h[ip][ProtocolPort{protocol, port}] = struct{}{}
}

// Remove forgets a port.
func (h HostPortInfo) Remove(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitize(ip, protocol)
	if m := h[ip]; m != nil {
		delete(m, ProtocolPort{protocol, port})
		if len(m) == 0 {
			delete(h, ip)
		}
	}
}

// CheckConflict reports whether the port is taken, treating 0.0.0.0 as every IP.
func (h HostPortInfo) CheckConflict(ip, protocol string, port int32) bool {
	if port <= 0 {
		return false
	}
	ip, protocol = sanitize(ip, protocol)
	pp := ProtocolPort{protocol, port}
	if ip == "0.0.0.0" {
		for _, m := range h {
			if _, ok := m[pp]; ok {
				return true
			}
		}
		return false
	}
	for _, key := range []string{"0.0.0.0", ip} {
		if _, ok := h[key][pp]; ok {
			return true
		}
	}
	return false
}

// IsExtendedResourceName reports a fully-qualified resource name outside kubernetes.io
// (and not a quota's requests.* name), as upstream's v1helper.IsExtendedResourceName.
func IsExtendedResourceName(name v1.ResourceName) bool {
	s := string(name)
	domain, _, found := strings.Cut(s, "/")
	if !found || domain == "" {
		return false
	}
	if domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		return false
	}
	return !strings.HasPrefix(s, "requests.")
}
