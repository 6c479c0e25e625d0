package core

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

// Service node ports come from this range, as upstream's default
// --service-node-port-range.
const (
	nodePortMin = 30000
	nodePortMax = 32767
)

func servicesResource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "services",
		Kind:         "Service",
		SingularName: "service",
		Namespaced:   true,
		ShortNames:   []string{"svc"},
		Categories:   []string{"all"},
		ValidateName: apivalidation.NameIsDNS1035Label,
		New:          func() runtime.Object { return &corev1.Service{} },
		NewList:      func() runtime.Object { return &corev1.ServiceList{} },
		Strategy: strategy[*corev1.Service]{
			defaults:       defaultService,
			prepareCreate:  func(_ context.Context, s *corev1.Service) { s.Status = corev1.ServiceStatus{} },
			prepareUpdate:  prepareServiceForUpdate,
			validate:       validateService,
			validateUpdate: validateServiceUpdate,
		},
		Fields: func(obj runtime.Object) fields.Set {
			s, ok := obj.(*corev1.Service)
			if !ok {
				return nil
			}
			return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
		},
		Printer:   servicePrinter(),
		HasStatus: true,
	}
}

// externallyAccessible is upstream's test for services that reach outside the
// cluster, which get an externalTrafficPolicy.
func externallyAccessible(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer || s.Spec.Type == corev1.ServiceTypeNodePort ||
		(s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.ExternalIPs) > 0)
}

func needsClusterIP(t corev1.ServiceType) bool { return t != corev1.ServiceTypeExternalName }

func needsNodePorts(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeNodePort ||
		(s.Spec.Type == corev1.ServiceTypeLoadBalancer && (s.Spec.AllocateLoadBalancerNodePorts == nil || *s.Spec.AllocateLoadBalancerNodePorts))
}

func isHeadless(s *corev1.Service) bool { return s.Spec.ClusterIP == corev1.ClusterIPNone }

// defaultService applies upstream's v1 defaults and the IP family fields the
// apiserver fills in before it allocates a cluster IP (which it does itself).
func defaultService(s *corev1.Service) {
	spec := &s.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{
				TimeoutSeconds: ptrTo(corev1.DefaultClientIPServiceAffinitySeconds)}}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if (p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0) || (p.TargetPort.Type == intstr.String && p.TargetPort.StrVal == "") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if externallyAccessible(s) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.InternalTrafficPolicy == nil && spec.Type != corev1.ServiceTypeExternalName {
		spec.InternalTrafficPolicy = ptrTo(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		spec.AllocateLoadBalancerNodePorts = ptrTo(true)
	}
	defaultIngressIPMode(s)
	// Clients may set either field; upstream keeps them in step.
	if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 {
		spec.ClusterIPs = []string{spec.ClusterIP}
	} else if spec.ClusterIP == "" && len(spec.ClusterIPs) > 0 {
		spec.ClusterIP = spec.ClusterIPs[0]
	}
	if needsClusterIP(spec.Type) {
		defaultIPFamilies(s)
	}
}

// defaultIngressIPMode marks load balancer addresses as virtual IPs unless the
// controller said otherwise.
func defaultIngressIPMode(s *corev1.Service) {
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return
	}
	for i := range s.Status.LoadBalancer.Ingress {
		in := &s.Status.LoadBalancer.Ingress[i]
		if in.IP != "" && in.IPMode == nil {
			in.IPMode = ptrTo(corev1.LoadBalancerIPModeVIP)
		}
	}
}

// defaultIPFamilies picks the IP family fields of a single-stack IPv4 cluster.
// Headless services without a selector are the exception upstream makes: they
// default to RequireDualStack with both families.
func defaultIPFamilies(s *corev1.Service) {
	spec := &s.Spec
	if isHeadless(s) && len(spec.Selector) == 0 {
		if spec.IPFamilyPolicy == nil {
			spec.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicyRequireDualStack)
		}
		if len(spec.IPFamilies) == 0 {
			spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
		if len(spec.IPFamilies) < 2 && *spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
			other := corev1.IPv6Protocol
			if spec.IPFamilies[0] == corev1.IPv6Protocol {
				other = corev1.IPv4Protocol
			}
			spec.IPFamilies = append(spec.IPFamilies, other)
		}
		return
	}
	if spec.IPFamilyPolicy == nil {
		spec.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicySingleStack)
	}
	if len(spec.IPFamilies) == 0 {
		family := corev1.IPv4Protocol
		if len(spec.ClusterIPs) > 0 && strings.Contains(spec.ClusterIPs[0], ":") {
			family = corev1.IPv6Protocol
		}
		spec.IPFamilies = []corev1.IPFamily{family}
	}
}

// prepareServiceForUpdate keeps what the apiserver allocated when an update leaves
// it out (a PUT of the manifest the user first applied): the cluster IPs, the node
// ports and the health check node port.
func prepareServiceForUpdate(_ context.Context, s, old *corev1.Service) {
	// Load balancer controllers write status through the status subresource, which
	// skips Default.
	defaultIngressIPMode(s)
	dropTypeDependentFields(s, old)
	if needsClusterIP(s.Spec.Type) && needsClusterIP(old.Spec.Type) && s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIP = old.Spec.ClusterIP
		s.Spec.ClusterIPs = old.Spec.ClusterIPs
	}
	if needsNodePorts(s) && needsNodePorts(old) {
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			if p.NodePort != 0 {
				continue
			}
			for _, o := range old.Spec.Ports {
				if o.Port == p.Port && o.Protocol == p.Protocol {
					p.NodePort = o.NodePort
					break
				}
			}
		}
	}
	if s.Spec.HealthCheckNodePort == 0 && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		s.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

// dropTypeDependentFields clears what the old type needed and the new one does not
// (cluster IPs when moving to ExternalName, node ports when moving to ClusterIP, ...)
// as long as the client left those fields as they were, as upstream does; a client
// that changed them gets its values validated instead.
func dropTypeDependentFields(s, old *corev1.Service) {
	if needsClusterIP(old.Spec.Type) && !needsClusterIP(s.Spec.Type) &&
		s.Spec.ClusterIP == old.Spec.ClusterIP && slices.Equal(s.Spec.ClusterIPs, old.Spec.ClusterIPs) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = nil, nil
	}
	if needsNodePorts(old) && !needsNodePorts(s) {
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			for _, o := range old.Spec.Ports {
				if o.Port == p.Port && o.Protocol == p.Protocol && o.NodePort == p.NodePort {
					p.NodePort = 0
				}
			}
		}
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if s.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
			s.Spec.HealthCheckNodePort = 0
		}
		if equality.Semantic.DeepEqual(s.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts) {
			s.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if equality.Semantic.DeepEqual(s.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass) {
			s.Spec.LoadBalancerClass = nil
		}
	}
	if externallyAccessible(old) && !externallyAccessible(s) && s.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		s.Spec.ExternalTrafficPolicy = ""
	}
	if old.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.Type == corev1.ServiceTypeExternalName &&
		equality.Semantic.DeepEqual(s.Spec.InternalTrafficPolicy, old.Spec.InternalTrafficPolicy) {
		s.Spec.InternalTrafficPolicy = nil
	}
}

var supportedServiceTypes = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeExternalName, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort}

func validateService(_ context.Context, s *corev1.Service) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &s.Spec
	var errs field.ErrorList

	if len(spec.Ports) == 0 && !isHeadless(s) && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	switch spec.Type {
	case corev1.ServiceTypeClusterIP:
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if isHeadless(s) {
			errs = append(errs, field.Invalid(specPath.Child("clusterIP"), spec.ClusterIP,
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if spec.ClusterIP != "" {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIP"), "must be empty for ExternalName services"))
		}
		if spec.ExternalName == "" {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		} else {
			for _, msg := range validname.IsDNS1123Subdomain(strings.TrimSuffix(spec.ExternalName, ".")) {
				errs = append(errs, field.Invalid(specPath.Child("externalName"), spec.ExternalName, msg))
			}
		}
	case "":
		errs = append(errs, field.Required(specPath.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, supportedServiceTypes))
	}

	portsPath := specPath.Child("ports")
	names := sets.New[string]()
	seen := map[string]bool{}
	nodePorts := map[string]bool{}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		idxPath := portsPath.Index(i)
		errs = append(errs, validateServicePort(p, len(spec.Ports) > 1, names, idxPath)...)
		key := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if seen[key] {
			errs = append(errs, field.Duplicate(idxPath, corev1.ServicePort{Port: p.Port, Protocol: p.Protocol}))
		}
		seen[key] = true

		if p.NodePort == 0 {
			continue
		}
		switch {
		case spec.Type == corev1.ServiceTypeClusterIP:
			errs = append(errs, field.Forbidden(idxPath.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
		case spec.Type == corev1.ServiceTypeExternalName:
			errs = append(errs, field.Forbidden(idxPath.Child("nodePort"), "may not be used when `type` is 'ExternalName'"))
		case p.NodePort < nodePortMin || p.NodePort > nodePortMax:
			errs = append(errs, field.Invalid(idxPath.Child("nodePort"), p.NodePort,
				fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", nodePortMin, nodePortMax)))
		}
		npKey := fmt.Sprintf("%d/%s", p.NodePort, p.Protocol)
		if nodePorts[npKey] {
			errs = append(errs, field.Duplicate(idxPath.Child("nodePort"), p.NodePort))
		}
		nodePorts[npKey] = true
	}

	if spec.Selector != nil {
		errs = append(errs, validname.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	}
	errs = append(errs, validateSessionAffinity(spec, specPath)...)
	errs = append(errs, validateClusterIPs(s, specPath)...)
	for i, ip := range spec.ExternalIPs {
		errs = append(errs, validation.IsValidIP(specPath.Child("externalIPs").Index(i), ip)...)
	}
	errs = append(errs, validateTrafficPolicies(s, specPath)...)
	errs = append(errs, validateLoadBalancerFields(s, specPath)...)
	if p := spec.IPFamilyPolicy; p != nil {
		switch *p {
		case corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack:
		default:
			errs = append(errs, field.NotSupported(specPath.Child("ipFamilyPolicy"), *p, []corev1.IPFamilyPolicy{
				corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack}))
		}
	}
	for i, f := range spec.IPFamilies {
		if f != corev1.IPv4Protocol && f != corev1.IPv6Protocol {
			errs = append(errs, field.NotSupported(specPath.Child("ipFamilies").Index(i), f, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}))
		}
	}
	return errs
}

func validateServicePort(p *corev1.ServicePort, requireName bool, names sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	namePath := fldPath.Child("name")
	switch {
	case requireName && p.Name == "":
		errs = append(errs, field.Required(namePath, ""))
	case p.Name != "":
		for _, msg := range validname.IsDNS1123Label(p.Name) {
			errs = append(errs, field.Invalid(namePath, p.Name, msg))
		}
		if names.Has(p.Name) {
			errs = append(errs, field.Duplicate(namePath, p.Name))
		}
		names.Insert(p.Name)
	}
	for _, msg := range validation.IsValidPortNum(int(p.Port)) {
		errs = append(errs, field.Invalid(fldPath.Child("port"), p.Port, msg))
	}
	errs = append(errs, validateProtocol(p.Protocol, fldPath.Child("protocol"))...)
	errs = append(errs, validatePortNumOrName(p.TargetPort, fldPath.Child("targetPort"))...)
	if p.AppProtocol != nil {
		errs = append(errs, validname.ValidateLabelName(*p.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return errs
}

// validateLoadBalancerFields keeps load balancer settings on load balancers.
func validateLoadBalancerFields(s *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	lb := s.Spec.Type == corev1.ServiceTypeLoadBalancer
	if c := s.Spec.LoadBalancerClass; c != nil {
		if lb {
			errs = append(errs, validname.ValidateLabelName(*c, specPath.Child("loadBalancerClass"))...)
		} else {
			errs = append(errs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when `type` is 'LoadBalancer'"))
		}
	}
	if len(s.Spec.LoadBalancerSourceRanges) > 0 {
		rangesPath := specPath.Child("loadBalancerSourceRanges")
		if !lb {
			errs = append(errs, field.Forbidden(rangesPath, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, r := range s.Spec.LoadBalancerSourceRanges {
			if _, _, err := net.ParseCIDR(strings.TrimSpace(r)); err != nil {
				errs = append(errs, field.Invalid(rangesPath.Index(i), r, "must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 "))
			}
		}
	}
	return errs
}

func validateSessionAffinity(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			return field.ErrorList{field.Forbidden(specPath.Child("sessionAffinityConfig"),
				fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone))}
		}
	case corev1.ServiceAffinityClientIP:
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > 86400 {
				return field.ErrorList{field.Invalid(specPath.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t,
					"must be greater than 0 and less than 86400")}
			}
		}
	case "":
		return field.ErrorList{field.Required(specPath.Child("sessionAffinity"), "")}
	default:
		return field.ErrorList{field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity,
			[]corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone})}
	}
	return nil
}

// validateClusterIPs checks clusterIP against clusterIPs and the addresses
// themselves; ExternalName services have none.
func validateClusterIPs(s *corev1.Service, specPath *field.Path) field.ErrorList {
	spec := &s.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	ipsPath := specPath.Child("clusterIPs")
	switch {
	case spec.ClusterIP != "" && len(spec.ClusterIPs) == 0:
		errs = append(errs, field.Required(ipsPath, ""))
	case spec.ClusterIP != "" && spec.ClusterIPs[0] != spec.ClusterIP:
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
	case spec.ClusterIP == "" && len(spec.ClusterIPs) > 0:
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	for i, ip := range spec.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(spec.ClusterIPs) > 1 {
				errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		errs = append(errs, validation.IsValidIP(ipsPath.Index(i), ip)...)
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	return errs
}

func validateTrafficPolicies(s *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &s.Spec
	etpPath := specPath.Child("externalTrafficPolicy")
	if !externallyAccessible(s) {
		if spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(etpPath, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	} else {
		switch spec.ExternalTrafficPolicy {
		case corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal:
		case "":
			errs = append(errs, field.Required(etpPath, ""))
		default:
			errs = append(errs, field.NotSupported(etpPath, spec.ExternalTrafficPolicy, []corev1.ServiceExternalTrafficPolicy{
				corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
		}
	}
	itpPath := specPath.Child("internalTrafficPolicy")
	if spec.Type == corev1.ServiceTypeExternalName {
		return errs
	}
	if spec.InternalTrafficPolicy == nil {
		return append(errs, field.Required(itpPath, ""))
	}
	switch *spec.InternalTrafficPolicy {
	case corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal:
	default:
		errs = append(errs, field.NotSupported(itpPath, *spec.InternalTrafficPolicy, []corev1.ServiceInternalTrafficPolicy{
			corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
	}
	return errs
}

// validateServiceUpdate keeps the cluster IP once it is set, except when the
// service moves to or from ExternalName.
func validateServiceUpdate(_ context.Context, s, old *corev1.Service) field.ErrorList {
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && old.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		!equality.Semantic.DeepEqual(s.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "loadBalancerClass"), s.Spec.LoadBalancerClass, "may not change once set")}
	}
	if !needsClusterIP(s.Spec.Type) || !needsClusterIP(old.Spec.Type) || len(old.Spec.ClusterIPs) == 0 {
		return nil
	}
	if isHeadless(s) && isHeadless(old) {
		return nil
	}
	path := field.NewPath("spec", "clusterIPs").Index(0)
	if len(s.Spec.ClusterIPs) == 0 {
		return field.ErrorList{field.Invalid(path, s.Spec.ClusterIPs, "primary clusterIP can not be unset")}
	}
	if s.Spec.ClusterIPs[0] != old.Spec.ClusterIPs[0] {
		return field.ErrorList{field.Invalid(path, s.Spec.ClusterIPs, "may not change once set")}
	}
	return nil
}

func servicePrinter() *registry.Printer {
	doc := corev1.ServiceSpec{}.SwaggerDoc()
	return printerFor([]metav1.TableColumnDefinition{
		registry.NameColumn,
		column("Type", "string", doc["type"]),
		column("Cluster-IP", "string", doc["clusterIP"]),
		column("External-IP", "string", doc["externalIPs"]),
		column("Port(s)", "string", doc["ports"]),
		registry.AgeColumn,
		wideColumn("Selector", "string", doc["selector"]),
	}, func(s *corev1.Service) []interface{} {
		clusterIP := "<none>"
		if len(s.Spec.ClusterIPs) > 0 {
			clusterIP = s.Spec.ClusterIPs[0]
		} else if s.Spec.ClusterIP != "" {
			clusterIP = s.Spec.ClusterIP
		}
		return []interface{}{s.Name, string(s.Spec.Type), clusterIP, serviceExternalIP(s),
			noneIfEmpty(servicePorts(s.Spec.Ports)), registry.Age(s.CreationTimestamp), labels.FormatLabels(s.Spec.Selector)}
	})
}

// serviceExternalIP is the EXTERNAL-IP cell; the server prints the wide form, so
// load balancer addresses are never shortened.
func serviceExternalIP(s *corev1.Service) string {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(s.Spec.ExternalIPs) > 0 {
			return strings.Join(s.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := sets.New[string]()
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				lb.Insert(in.IP)
			} else if in.Hostname != "" {
				lb.Insert(in.Hostname)
			}
		}
		addrs := sets.List(lb)
		sort.Strings(addrs)
		addrs = append(addrs, s.Spec.ExternalIPs...)
		if len(addrs) == 0 {
			return "<pending>"
		}
		return strings.Join(addrs, ",")
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	}
	return "<unknown>"
}

// servicePorts renders ports as "80/TCP" or, with a node port, "80:30080/TCP".
func servicePorts(ports []corev1.ServicePort) string {
	out := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			out[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			out[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(out, ",")
}
