package core

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry/validname"
)

// Scheduling, DNS and identity parts of a pod spec: affinity, topology spread,
// DNS config, host aliases, readiness gates and security context IDs.

// Limits upstream puts on a pod's DNS configuration.
const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
)

func validatePodSpecExtras(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Affinity != nil {
		errs = append(errs, validateAffinity(spec.Affinity, fldPath.Child("affinity"))...)
	}
	// Each path is built only where there is something to check: most pods have none
	// of these.
	if len(spec.TopologySpreadConstraints) > 0 {
		errs = append(errs, validateTopologySpread(spec.TopologySpreadConstraints, fldPath.Child("topologySpreadConstraints"))...)
	}
	if spec.DNSConfig != nil {
		errs = append(errs, validateDNSConfig(spec, fldPath.Child("dnsConfig"))...)
	}
	if sc := spec.SecurityContext; sc != nil && len(sc.Sysctls) > 0 {
		errs = append(errs, validateSysctls(sc, fldPath.Child("securityContext", "sysctls"))...)
	}
	for i, h := range spec.HostAliases {
		idxPath := fldPath.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIP(idxPath.Child("ip"), h.IP)...)
		for j, name := range h.Hostnames {
			for _, msg := range validname.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(idxPath.Child("hostnames").Index(j), name, msg))
			}
		}
	}
	for i, g := range spec.ReadinessGates {
		errs = append(errs, validname.ValidateLabelName(string(g.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	if sc := spec.SecurityContext; sc != nil {
		scPath := fldPath.Child("securityContext")
		errs = append(errs, validateID(sc.RunAsUser, scPath.Child("runAsUser"))...)
		errs = append(errs, validateID(sc.RunAsGroup, scPath.Child("runAsGroup"))...)
		errs = append(errs, validateID(sc.FSGroup, scPath.Child("fsGroup"))...)
		for i, g := range sc.SupplementalGroups {
			errs = append(errs, validateID(&g, scPath.Child("supplementalGroups").Index(i))...)
		}
	}
	for _, list := range []struct {
		name       string
		containers []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i, c := range list.containers {
			if sc := c.SecurityContext; sc != nil {
				scPath := fldPath.Child(list.name).Index(i).Child("securityContext")
				errs = append(errs, validateID(sc.RunAsUser, scPath.Child("runAsUser"))...)
				errs = append(errs, validateID(sc.RunAsGroup, scPath.Child("runAsGroup"))...)
			}
		}
	}
	return errs
}

// validateID checks a user or group ID (they share a range).
func validateID(id *int64, fldPath *field.Path) field.ErrorList {
	if id == nil {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidUserID(*id) {
		errs = append(errs, field.Invalid(fldPath, *id, msg))
	}
	return errs
}

func validateAffinity(a *corev1.Affinity, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		naPath := fldPath.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			errs = append(errs, validateNodeSelector(req, naPath.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		prefPath := naPath.Child("preferredDuringSchedulingIgnoredDuringExecution")
		for i, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			errs = append(errs, validateWeight(term.Weight, prefPath.Index(i).Child("weight"))...)
			errs = append(errs, validateNodeSelectorTerm(&term.Preference, prefPath.Index(i).Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAffinity"))...)
	}
	if paa := a.PodAntiAffinity; paa != nil {
		errs = append(errs, validatePodAffinityTerms(paa.RequiredDuringSchedulingIgnoredDuringExecution, paa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateWeight(w int32, fldPath *field.Path) field.ErrorList {
	if w <= 0 || w > 100 {
		return field.ErrorList{field.Invalid(fldPath, w, "must be in the range 1-100")}
	}
	return nil
}

func validateNodeSelector(s *corev1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(s.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i := range s.NodeSelectorTerms {
		errs = append(errs, validateNodeSelectorTerm(&s.NodeSelectorTerms[i], termsPath.Index(i))...)
	}
	return errs
}

func validateNodeSelectorTerm(term *corev1.NodeSelectorTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, req := range term.MatchExpressions {
		errs = append(errs, validateNodeSelectorRequirement(req, fldPath.Child("matchExpressions").Index(i))...)
	}
	for i, req := range term.MatchFields {
		p := fldPath.Child("matchFields").Index(i)
		if req.Key != metav1.ObjectNameField {
			errs = append(errs, field.Invalid(p.Child("key"), req.Key, "not a valid field selector key"))
			continue
		}
		switch req.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(req.Values) != 1 {
				errs = append(errs, field.Required(p.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			errs = append(errs, field.Invalid(p.Child("operator"), req.Operator, "not a valid selector operator"))
		}
	}
	return errs
}

func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	valuesPath := fldPath.Child("values")
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(valuesPath, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(valuesPath, "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		} else if _, err := strconv.ParseInt(req.Values[0], 10, 64); err != nil {
			errs = append(errs, field.Invalid(valuesPath.Index(0), req.Values[0], "must be an integer"))
		}
	default:
		errs = append(errs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	return append(errs, validname.ValidateLabelName(req.Key, fldPath.Child("key"))...)
}

func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	reqPath := fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution")
	for i := range required {
		errs = append(errs, validatePodAffinityTerm(&required[i], reqPath.Index(i))...)
	}
	prefPath := fldPath.Child("preferredDuringSchedulingIgnoredDuringExecution")
	for i := range preferred {
		errs = append(errs, validateWeight(preferred[i].Weight, prefPath.Index(i).Child("weight"))...)
		errs = append(errs, validatePodAffinityTerm(&preferred[i].PodAffinityTerm, prefPath.Index(i).Child("podAffinityTerm"))...)
	}
	return errs
}

func validatePodAffinityTerm(term *corev1.PodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	if term.LabelSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(term.LabelSelector, opts, fldPath.Child("labelSelector"))...)
	}
	if term.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(term.NamespaceSelector, opts, fldPath.Child("namespaceSelector"))...)
	}
	for i, ns := range term.Namespaces {
		for _, msg := range validname.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(fldPath.Child("namespaces").Index(i), ns, msg))
		}
	}
	if term.TopologyKey == "" {
		errs = append(errs, field.Required(fldPath.Child("topologyKey"), "can not be empty"))
	} else {
		errs = append(errs, validname.ValidateLabelName(term.TopologyKey, fldPath.Child("topologyKey"))...)
	}
	return errs
}

func validateTopologySpread(constraints []corev1.TopologySpreadConstraint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range constraints {
		p := fldPath.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
		} else {
			errs = append(errs, validname.ValidateLabelName(c.TopologyKey, p.Child("topologyKey"))...)
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		case "":
			errs = append(errs, field.Required(p.Child("whenUnsatisfiable"), ""))
		default:
			errs = append(errs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable,
				[]corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}))
		}
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains, "must be greater than 0"))
			} else if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains,
					fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		if c.LabelSelector != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
		}
		key := fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(p, key))
		}
		seen.Insert(key)
	}
	return errs
}

func validateDNSConfig(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	cfg := spec.DNSConfig
	if cfg == nil {
		return nil
	}
	var errs field.ErrorList
	nsPath := fldPath.Child("nameservers")
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(nsPath, cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(nsPath.Index(i), ns)...)
	}
	if spec.DNSPolicy == corev1.DNSNone && len(cfg.Nameservers) == 0 {
		errs = append(errs, field.Required(nsPath, "must provide at least one DNS nameserver when `dnsPolicy` is None"))
	}
	searchPath := fldPath.Child("searches")
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(searchPath, cfg.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	for i, s := range cfg.Searches {
		// A trailing dot only marks the name as fully qualified.
		for _, msg := range validname.IsDNS1123Subdomain(strings.TrimSuffix(s, ".")) {
			errs = append(errs, field.Invalid(searchPath.Index(i), s, msg))
		}
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("options").Index(i), "Option.Name must not be empty"))
		}
	}
	return errs
}
