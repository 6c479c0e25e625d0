// Package networking describes the networking.k8s.io/v1 resources: ingresses,
// ingressclasses, networkpolicies, ipaddresses and servicecidrs, with their
// defaulting, validation and printing as upstream Kubernetes does them.
package networking

import (
	networkingv1 "k8s.io/api/networking/v1"

	"mizzen/internal/registry"
)

// Resources returns the networking.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{ingresses(), ingressClasses(), networkPolicies(), ipAddresses(), serviceCIDRs()}
}

var groupVersion = networkingv1.SchemeGroupVersion
