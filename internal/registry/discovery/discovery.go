// Package discovery describes the discovery.k8s.io/v1 endpointslices resource, with
// its defaulting, validation and printing as upstream Kubernetes does them.
package discovery

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"mizzen/internal/registry"
)

// Upstream's limits on an endpoint slice.
const (
	maxEndpoints      = 1000
	maxAddresses      = 100
	maxPorts          = 20000
	maxTopologyLabels = 16
	maxZoneHints      = 8
)

// Resources returns the discovery.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	// upstream takes these descriptions from the v1beta1 docs
	doc := discoveryv1beta1.EndpointSlice{}.SwaggerDoc()
	return []*registry.Resource{{
		GroupVersion: discoveryv1.SchemeGroupVersion,
		Resource:     "endpointslices",
		Kind:         "EndpointSlice",
		SingularName: "endpointslice",
		Namespaced:   true,
		New:          func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:      func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		Strategy:     endpointSliceStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "AddressType", Type: "string", Description: doc["addressType"]},
				{Name: "Ports", Type: "string", Description: doc["ports"]},
				{Name: "Endpoints", Type: "string", Description: doc["endpoints"]},
				registry.AgeColumn,
			},
			Row: printEndpointSlice,
		},
	}}
}

type endpointSliceStrategy struct{ registry.BaseStrategy }

func (endpointSliceStrategy) Default(obj runtime.Object) {
	slice := obj.(*discoveryv1.EndpointSlice)
	for i := range slice.Ports {
		p := &slice.Ports[i]
		if p.Name == nil {
			name := ""
			p.Name = &name
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

func (endpointSliceStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateEndpointSlice(obj.(*discoveryv1.EndpointSlice))
}

func (endpointSliceStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	slice, oldSlice := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
	allErrs := validateEndpointSlice(slice)
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(slice.AddressType, oldSlice.AddressType, field.NewPath("addressType"))...)
}

var (
	supportedAddressTypes  = []string{string(discoveryv1.AddressTypeFQDN), string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6)}
	supportedPortProtocols = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}
)

func validateEndpointSlice(slice *discoveryv1.EndpointSlice) field.ErrorList {
	var allErrs field.ErrorList
	typePath := field.NewPath("addressType")
	switch slice.AddressType {
	case "":
		allErrs = append(allErrs, field.Required(typePath, ""))
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	default:
		allErrs = append(allErrs, field.NotSupported(typePath, slice.AddressType, supportedAddressTypes))
	}
	allErrs = append(allErrs, validateEndpoints(slice.Endpoints, slice.AddressType, field.NewPath("endpoints"))...)
	return append(allErrs, validatePorts(slice.Ports, field.NewPath("ports"))...)
}

func validateEndpoints(endpoints []discoveryv1.Endpoint, addressType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	if len(endpoints) > maxEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(endpoints), maxEndpoints)}
	}
	var allErrs field.ErrorList
	for i, ep := range endpoints {
		epPath := fldPath.Index(i)
		addrPath := epPath.Child("addresses")
		if len(ep.Addresses) == 0 {
			allErrs = append(allErrs, field.Required(addrPath, "must contain at least 1 address"))
		} else if len(ep.Addresses) > maxAddresses {
			allErrs = append(allErrs, field.TooMany(addrPath, len(ep.Addresses), maxAddresses))
		}
		for j, addr := range ep.Addresses {
			allErrs = append(allErrs, validateAddress(addr, addressType, addrPath.Index(j))...)
		}
		if ep.NodeName != nil {
			for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(*ep.NodeName, false) {
				allErrs = append(allErrs, field.Invalid(epPath.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		topologyPath := epPath.Child("deprecatedTopology")
		if len(ep.DeprecatedTopology) > maxTopologyLabels {
			allErrs = append(allErrs, field.TooMany(topologyPath, len(ep.DeprecatedTopology), maxTopologyLabels))
		}
		allErrs = append(allErrs, metav1validation.ValidateLabels(ep.DeprecatedTopology, topologyPath)...)
		if ep.Hostname != nil {
			for _, msg := range validation.IsDNS1123Label(*ep.Hostname) {
				allErrs = append(allErrs, field.Invalid(epPath.Child("hostname"), *ep.Hostname, msg))
			}
		}
		if ep.Hints != nil {
			allErrs = append(allErrs, validateHints(ep.Hints, epPath.Child("hints"))...)
		}
	}
	return allErrs
}

// validateAddress checks an address against the slice's address type; addresses of
// an unknown type are left alone, the type itself being reported.
func validateAddress(addr string, addressType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	switch addressType {
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(fldPath, addr)
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
	default:
		return nil
	}
	ip := netutils.ParseIPSloppy(addr)
	family := "IPv4"
	if addressType == discoveryv1.AddressTypeIPv6 {
		family = "IPv6"
	}
	if ip == nil || (family == "IPv4") != (ip.To4() != nil) {
		return field.ErrorList{field.Invalid(fldPath, addr, "must be a valid "+family+" address")}
	}
	// Endpoints must be reachable from elsewhere in the cluster.
	var allErrs field.ErrorList
	if ip.IsUnspecified() {
		allErrs = append(allErrs, field.Invalid(fldPath, addr, fmt.Sprintf("may not be unspecified (%v)", addr)))
	}
	if ip.IsLoopback() {
		allErrs = append(allErrs, field.Invalid(fldPath, addr, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		allErrs = append(allErrs, field.Invalid(fldPath, addr, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		allErrs = append(allErrs, field.Invalid(fldPath, addr, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return allErrs
}

func validateHints(hints *discoveryv1.EndpointHints, fldPath *field.Path) field.ErrorList {
	zonesPath := fldPath.Child("forZones")
	if len(hints.ForZones) > maxZoneHints {
		return field.ErrorList{field.TooMany(zonesPath, len(hints.ForZones), maxZoneHints)}
	}
	var allErrs field.ErrorList
	seen := map[string]bool{}
	for i, zone := range hints.ForZones {
		namePath := zonesPath.Index(i).Child("name")
		if seen[zone.Name] {
			allErrs = append(allErrs, field.Duplicate(namePath, zone.Name))
		}
		seen[zone.Name] = true
		for _, msg := range validation.IsValidLabelValue(zone.Name) {
			allErrs = append(allErrs, field.Invalid(namePath, zone.Name, msg))
		}
	}
	return allErrs
}

func validatePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxPorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxPorts)}
	}
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i, p := range ports {
		portPath := fldPath.Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			for _, msg := range validation.IsDNS1123Label(name) {
				allErrs = append(allErrs, field.Invalid(portPath.Child("name"), name, msg))
			}
		}
		if names[name] {
			allErrs = append(allErrs, field.Duplicate(portPath.Child("name"), name))
		}
		names[name] = true
		switch {
		case p.Protocol == nil:
			allErrs = append(allErrs, field.Required(portPath.Child("protocol"), ""))
		case *p.Protocol != corev1.ProtocolTCP && *p.Protocol != corev1.ProtocolUDP && *p.Protocol != corev1.ProtocolSCTP:
			allErrs = append(allErrs, field.NotSupported(portPath.Child("protocol"), *p.Protocol, supportedPortProtocols))
		}
		if p.AppProtocol != nil {
			for _, msg := range validation.IsQualifiedName(*p.AppProtocol) {
				allErrs = append(allErrs, field.Invalid(portPath.Child("appProtocol"), *p.AppProtocol, msg))
			}
		}
	}
	return allErrs
}

func printEndpointSlice(obj runtime.Object) []interface{} {
	slice := obj.(*discoveryv1.EndpointSlice)
	var ports []string
	for _, p := range slice.Ports {
		switch {
		case p.Port != nil:
			ports = append(ports, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			ports = append(ports, *p.Name)
		default:
			ports = append(ports, "*")
		}
	}
	var addresses []string
	for _, ep := range slice.Endpoints {
		addresses = append(addresses, ep.Addresses...)
	}
	return []interface{}{slice.Name, string(slice.AddressType), firstThree(ports), firstThree(addresses), registry.Age(slice.CreationTimestamp)}
}

// firstThree joins up to three items and says how many more there are, or prints
// "<unset>" for none, as upstream's endpoint slice columns do.
func firstThree(items []string) string {
	const max = 3
	switch {
	case len(items) == 0:
		return "<unset>"
	case len(items) > max:
		return fmt.Sprintf("%s + %d more...", strings.Join(items[:max], ","), len(items)-max)
	}
	return strings.Join(items, ",")
}
