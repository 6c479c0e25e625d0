package networking

import (
	"context"
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"mizzen/internal/registry"
)

// ingressClassAnnotation is the deprecated way to name an ingress's class.
const ingressClassAnnotation = "kubernetes.io/ingress.class"

func ingresses() *registry.Resource {
	return &registry.Resource{
		GroupVersion:    groupVersion,
		Resource:        "ingresses",
		Kind:            "Ingress",
		SingularName:    "ingress",
		Namespaced:      true,
		ShortNames:      []string{"ing"},
		New:             func() runtime.Object { return &networkingv1.Ingress{} },
		NewList:         func() runtime.Object { return &networkingv1.IngressList{} },
		Strategy:        ingressStrategy{},
		HasStatus:       true,
		StatusKeepsMeta: registry.MetaAll,
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Class", Type: "string", Description: "The name of the IngressClass resource that should be used for additional configuration"},
				{Name: "Hosts", Type: "string", Description: "Hosts that incoming requests are matched against before the ingress rule"},
				{Name: "Address", Type: "string", Description: "Address is a list containing ingress points for the load-balancer"},
				{Name: "Ports", Type: "string", Description: "Ports of TLS configurations that open"},
				registry.AgeColumn,
			},
			Row: printIngress,
		},
	}
}

type ingressStrategy struct{ registry.BaseStrategy }

// PrepareForCreate starts an ingress with no status: only its controller reports one.
func (ingressStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*networkingv1.Ingress).Status = networkingv1.IngressStatus{}
}

func (ingressStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	ing := obj.(*networkingv1.Ingress)
	allErrs := validateIngressSpec(&ing.Spec, field.NewPath("spec"))
	// The deprecated annotation and the field may both be set only when they agree.
	if value, ok := ing.Annotations[ingressClassAnnotation]; ok && ing.Spec.IngressClassName != nil && value != *ing.Spec.IngressClassName {
		allErrs = append(allErrs, field.Invalid(field.NewPath("annotations").Child(ingressClassAnnotation), value,
			"must match `ingressClassName` when both are specified"))
	}
	return allErrs
}

// ValidateUpdate also checks the status, which the server routes through updates of
// the status subresource.
func (ingressStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	ing := obj.(*networkingv1.Ingress)
	allErrs := validateIngressSpec(&ing.Spec, field.NewPath("spec"))
	return append(allErrs, validateLoadBalancerStatus(&ing.Status.LoadBalancer, field.NewPath("status", "loadBalancer"))...)
}

// validateLoadBalancerStatus checks the addresses a controller reports.
func validateLoadBalancerStatus(status *networkingv1.IngressLoadBalancerStatus, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ing := range status.Ingress {
		ingPath := fldPath.Child("ingress").Index(i)
		if ing.IP != "" {
			allErrs = append(allErrs, validation.IsValidIPForLegacyField(ingPath.Child("ip"), ing.IP, false, nil)...)
		}
		if ing.Hostname != "" {
			for _, msg := range validation.IsDNS1123Subdomain(ing.Hostname) {
				allErrs = append(allErrs, field.Invalid(ingPath.Child("hostname"), ing.Hostname, msg))
			}
			if netutils.ParseIPSloppy(ing.Hostname) != nil {
				allErrs = append(allErrs, field.Invalid(ingPath.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return allErrs
}

func validateIngressSpec(spec *networkingv1.IngressSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		allErrs = append(allErrs, field.Invalid(fldPath, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		allErrs = append(allErrs, validateIngressBackend(spec.DefaultBackend, fldPath.Child("defaultBackend"))...)
	}
	for i, rule := range spec.Rules {
		allErrs = append(allErrs, validateIngressRule(&rule, fldPath.Child("rules").Index(i))...)
	}
	for i, tls := range spec.TLS {
		tlsPath := fldPath.Child("tls").Index(i)
		for j, host := range tls.Hosts {
			allErrs = append(allErrs, validateHost(host, tlsPath.Child("hosts").Index(j))...)
		}
		if tls.SecretName != "" {
			for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(tls.SecretName, false) {
				allErrs = append(allErrs, field.Invalid(tlsPath.Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	if spec.IngressClassName != nil {
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(*spec.IngressClassName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("ingressClassName"), *spec.IngressClassName, msg))
		}
	}
	return allErrs
}

// validateHost checks a rule or TLS host: a DNS subdomain, or one with a leading "*.".
func validateHost(host string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	check := validation.IsDNS1123Subdomain
	if strings.Contains(host, "*") {
		check = validation.IsWildcardDNS1123Subdomain
	}
	for _, msg := range check(host) {
		allErrs = append(allErrs, field.Invalid(fldPath, host, msg))
	}
	return allErrs
}

func validateIngressRule(rule *networkingv1.IngressRule, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if rule.Host != "" {
		if netutils.ParseIPSloppy(rule.Host) != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("host"), rule.Host, "must be a DNS name, not an IP address"))
		}
		allErrs = append(allErrs, validateHost(rule.Host, fldPath.Child("host"))...)
	}
	if rule.HTTP == nil {
		return allErrs
	}
	httpPath := fldPath.Child("http")
	if len(rule.HTTP.Paths) == 0 {
		allErrs = append(allErrs, field.Required(httpPath.Child("paths"), ""))
	}
	for i, p := range rule.HTTP.Paths {
		allErrs = append(allErrs, validateHTTPIngressPath(&p, httpPath.Child("paths").Index(i))...)
	}
	return allErrs
}

var (
	supportedPathTypes   = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix)}
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

func validateHTTPIngressPath(p *networkingv1.HTTPIngressPath, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if p.PathType == nil {
		return append(allErrs, field.Required(fldPath.Child("pathType"), "pathType must be specified"))
	}
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("path"), p.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(p.Path, seq) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("path"), p.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suffix := range invalidPathSuffixes {
			if strings.HasSuffix(p.Path, suffix) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("path"), p.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("path"), p.Path, "must be an absolute path"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("pathType"), *p.PathType, supportedPathTypes))
	}
	return append(allErrs, validateIngressBackend(&p.Backend, fldPath.Child("backend"))...)
}

func validateIngressBackend(backend *networkingv1.IngressBackend, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case backend.Resource != nil && backend.Service != nil:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "cannot set both resource and service backends"))
	case backend.Resource != nil:
		r := backend.Resource
		allErrs = append(allErrs, validateTypedReference(r.APIGroup, r.Kind, r.Name, fldPath.Child("resource"))...)
	case backend.Service != nil:
		svc := backend.Service
		if svc.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("service", "name"), ""))
		} else {
			for _, msg := range apimachineryvalidation.NameIsDNS1035Label(svc.Name, false) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("service", "name"), svc.Name, msg))
			}
		}
		hasName, hasNumber := svc.Port.Name != "", svc.Port.Number != 0
		switch {
		case hasName && hasNumber:
			allErrs = append(allErrs, field.Invalid(fldPath, "", "cannot set both port name & port number"))
		case hasName:
			for _, msg := range validation.IsValidPortName(svc.Port.Name) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("service", "port", "name"), svc.Port.Name, msg))
			}
		case hasNumber:
			for _, msg := range validation.IsValidPortNum(int(svc.Port.Number)) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("service", "port", "number"), svc.Port.Number, msg))
			}
		default:
			allErrs = append(allErrs, field.Required(fldPath, "port name or number is required"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "resource or service backend is required"))
	}
	return allErrs
}

// validateTypedReference checks a reference to an object by group, kind and name, as
// ingress resource backends and ingress class parameters hold.
func validateTypedReference(apiGroup *string, kind, name string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if apiGroup != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*apiGroup) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("apiGroup"), *apiGroup, msg))
		}
	}
	if kind == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("kind"), "kind is required"))
	} else {
		for _, msg := range path.IsValidPathSegmentName(kind) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("kind"), kind, msg))
		}
	}
	if name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "name is required"))
	} else {
		for _, msg := range path.IsValidPathSegmentName(name) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), name, msg))
		}
	}
	return allErrs
}

func printIngress(obj runtime.Object) []interface{} {
	ing := obj.(*networkingv1.Ingress)
	className := "<none>"
	if ing.Spec.IngressClassName != nil {
		className = *ing.Spec.IngressClassName
	}
	ports := "80"
	if len(ing.Spec.TLS) != 0 {
		ports = "80, 443"
	}
	return []interface{}{ing.Name, className, formatIngressHosts(ing.Spec.Rules),
		formatIngressAddress(ing.Status.LoadBalancer), ports, registry.Age(ing.CreationTimestamp)}
}

// formatIngressHosts lists up to three rule hosts, "*" when no rule names one.
func formatIngressHosts(rules []networkingv1.IngressRule) string {
	const max = 3
	var hosts []string
	more := false
	for _, rule := range rules {
		if len(hosts) == max {
			more = true
			break
		}
		if rule.Host != "" {
			hosts = append(hosts, rule.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	out := strings.Join(hosts, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", out, len(rules)-max)
	}
	return out
}

// formatIngressAddress joins the sorted, distinct load-balancer IPs (or hostnames).
// Upstream's server-side tables are always built wide, so the cell is never cut short.
func formatIngressAddress(status networkingv1.IngressLoadBalancerStatus) string {
	seen := map[string]bool{}
	var addrs []string
	for _, ing := range status.Ingress {
		addr := ing.IP
		if addr == "" {
			addr = ing.Hostname
		}
		if addr != "" && !seen[addr] {
			seen[addr] = true
			addrs = append(addrs, addr)
		}
	}
	sort.Strings(addrs)
	return strings.Join(addrs, ",")
}
