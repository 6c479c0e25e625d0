package core

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

func endpointsResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "endpoints",
		Kind:         "Endpoints",
		SingularName: "endpoints",
		Namespaced:   true,
		ShortNames:   []string{"ep"},
		New:          func() runtime.Object { return &corev1.Endpoints{} },
		NewList:      func() runtime.Object { return &corev1.EndpointsList{} },
		Strategy: strategy[*corev1.Endpoints]{
			defaults: func(ep *corev1.Endpoints) {
				for i := range ep.Subsets {
					for j := range ep.Subsets[i].Ports {
						if p := &ep.Subsets[i].Ports[j]; p.Protocol == "" {
							p.Protocol = corev1.ProtocolTCP
						}
					}
				}
			},
			validate: validateEndpoints,
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"]),
			registry.AgeColumn,
		}, func(ep *corev1.Endpoints) []interface{} {
			return []interface{}{ep.Name, formatEndpoints(ep), registry.Age(ep.CreationTimestamp)}
		}),
	}
}

func validateEndpoints(_ context.Context, ep *corev1.Endpoints) field.ErrorList {
	var errs field.ErrorList
	subsetsPath := field.NewPath("subsets")
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		idxPath := subsetsPath.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(idxPath, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], idxPath.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], idxPath.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			p := &ss.Ports[j]
			portPath := idxPath.Child("ports").Index(j)
			if len(ss.Ports) > 1 && p.Name == "" {
				errs = append(errs, field.Required(portPath.Child("name"), ""))
			} else if p.Name != "" {
				for _, msg := range validname.IsDNS1123Label(p.Name) {
					errs = append(errs, field.Invalid(portPath.Child("name"), p.Name, msg))
				}
			}
			for _, msg := range validation.IsValidPortNum(int(p.Port)) {
				errs = append(errs, field.Invalid(portPath.Child("port"), p.Port, msg))
			}
			errs = append(errs, validateProtocol(p.Protocol, portPath.Child("protocol"))...)
		}
	}
	return errs
}

func validateEndpointAddress(a *corev1.EndpointAddress, fldPath *field.Path) field.ErrorList {
	ipPath := fldPath.Child("ip")
	errs := validation.IsValidIP(ipPath, a.IP)
	if a.Hostname != "" {
		for _, msg := range validname.IsDNS1123Label(a.Hostname) {
			errs = append(errs, field.Invalid(fldPath.Child("hostname"), a.Hostname, msg))
		}
	}
	if a.NodeName != nil {
		for _, msg := range validname.IsDNS1123Subdomain(*a.NodeName) {
			errs = append(errs, field.Invalid(fldPath.Child("nodeName"), *a.NodeName, msg))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// Endpoints must be reachable from other nodes.
	ip := net.ParseIP(a.IP)
	switch {
	case ip.IsUnspecified():
		errs = append(errs, field.Invalid(ipPath, a.IP, fmt.Sprintf("may not be unspecified (%v)", a.IP)))
	case ip.IsLoopback():
		errs = append(errs, field.Invalid(ipPath, a.IP, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	case ip.IsLinkLocalUnicast():
		errs = append(errs, field.Invalid(ipPath, a.IP, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	case ip.IsLinkLocalMulticast():
		errs = append(errs, field.Invalid(ipPath, a.IP, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// formatEndpoints lists up to three ip:port pairs and counts the rest, as the
// ENDPOINTS column shows them; "<none>" when there are no subsets.
func formatEndpoints(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	const max = 3
	var list []string
	count := 0
	add := func(s string) {
		if len(list) < max {
			list = append(list, s)
		}
		count++
	}
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			// Headless services may have endpoints without ports.
			for _, a := range ss.Addresses {
				add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	out := strings.Join(list, ",")
	if count > max {
		return fmt.Sprintf("%s + %d more...", out, count-max)
	}
	return out
}
