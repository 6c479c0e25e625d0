package admissionregistration

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Webhook defaults as upstream's v1 defaulting sets them, and its limit on match conditions.
const (
	defaultTimeoutSeconds = int32(10)
	defaultServicePort    = int32(443)
	maxMatchConditions    = 64
)

func defaultHook(h hook) {
	if *h.FailurePolicy == nil {
		policy := admissionregistrationv1.Fail
		*h.FailurePolicy = &policy
	}
	if *h.MatchPolicy == nil {
		policy := admissionregistrationv1.Equivalent
		*h.MatchPolicy = &policy
	}
	if *h.NamespaceSelector == nil {
		*h.NamespaceSelector = &metav1.LabelSelector{}
	}
	if *h.ObjectSelector == nil {
		*h.ObjectSelector = &metav1.LabelSelector{}
	}
	if *h.TimeoutSeconds == nil {
		timeout := defaultTimeoutSeconds
		*h.TimeoutSeconds = &timeout
	}
	if h.ReinvocationPolicy != nil && *h.ReinvocationPolicy == nil {
		policy := admissionregistrationv1.NeverReinvocationPolicy
		*h.ReinvocationPolicy = &policy
	}
	for i := range h.Rules {
		if h.Rules[i].Scope == nil {
			scope := admissionregistrationv1.AllScopes
			h.Rules[i].Scope = &scope
		}
	}
	if svc := h.ClientConfig.Service; svc != nil && svc.Port == nil {
		port := defaultServicePort
		svc.Port = &port
	}
}

// validationOptions are the checks that an update may skip when the stored object
// predates them, as upstream relaxes them.
type validationOptions struct {
	requireRecognizedReviewVersion bool
	requireUniqueNames             bool
	requireNoSideEffects           bool
	allowInvalidLabelValues        bool
	ignoreMatchConditions          bool
}

var strictOptions = validationOptions{requireRecognizedReviewVersion: true, requireUniqueNames: true, requireNoSideEffects: true}

// updateOptions relaxes each check the stored hooks already failed, and skips match
// conditions when the update leaves them as they were.
func updateOptions(hooks, old []hook) validationOptions {
	opts := strictOptions
	names := map[string]bool{}
	for _, h := range old {
		if len(h.AdmissionReviewVersions) > 0 && !hasAcceptedReviewVersion(h.AdmissionReviewVersions) {
			opts.requireRecognizedReviewVersion = false
		}
		if names[h.Name] {
			opts.requireUniqueNames = false
		}
		names[h.Name] = true
		if h.SideEffects == nil || !slices.Contains(noSideEffectClasses, string(*h.SideEffects)) {
			opts.requireNoSideEffects = false
		}
		for _, s := range []*metav1.LabelSelector{*h.NamespaceSelector, *h.ObjectSelector} {
			if s != nil && len(metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0 {
				opts.allowInvalidLabelValues = true
			}
		}
	}
	opts.ignoreMatchConditions = len(hooks) == len(old)
	for i := range old {
		if opts.ignoreMatchConditions && !reflect.DeepEqual(hooks[i].MatchConditions, old[i].MatchConditions) {
			opts.ignoreMatchConditions = false
		}
	}
	return opts
}

var (
	acceptedReviewVersions     = []string{"v1", "v1beta1"}
	supportedSideEffectClasses = []string{"None", "NoneOnDryRun", "Some", "Unknown"}
	noSideEffectClasses        = []string{"None", "NoneOnDryRun"}
	supportedFailurePolicies   = []string{"Fail", "Ignore"}
	supportedMatchPolicies     = []string{"Equivalent", "Exact"}
	supportedReinvocation      = []string{"IfNeeded", "Never"}
	supportedOperations        = []string{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}
	supportedScopes            = []string{"*", "Cluster", "Namespaced"}
)

func validateConfiguration(hooks []hook, opts validationOptions) field.ErrorList {
	var allErrs field.ErrorList
	names := map[string]bool{}
	for i, h := range hooks {
		hookPath := field.NewPath("webhooks").Index(i)
		allErrs = append(allErrs, validateHook(h, opts, hookPath)...)
		allErrs = append(allErrs, validateReviewVersions(h.AdmissionReviewVersions, opts.requireRecognizedReviewVersion, hookPath.Child("admissionReviewVersions"))...)
		if opts.requireUniqueNames && h.Name != "" {
			if names[h.Name] {
				allErrs = append(allErrs, field.Duplicate(hookPath.Child("name"), h.Name))
			}
			names[h.Name] = true
		}
	}
	return allErrs
}

func validateHook(h hook, opts validationOptions, fldPath *field.Path) field.ErrorList {
	allErrs := validation.IsFullyQualifiedName(fldPath.Child("name"), h.Name)
	for i := range h.Rules {
		allErrs = append(allErrs, validateRule(&h.Rules[i], fldPath.Child("rules").Index(i))...)
	}
	if p := *h.FailurePolicy; p != nil && !slices.Contains(supportedFailurePolicies, string(*p)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("failurePolicy"), *p, supportedFailurePolicies))
	}
	if p := *h.MatchPolicy; p != nil && !slices.Contains(supportedMatchPolicies, string(*p)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("matchPolicy"), *p, supportedMatchPolicies))
	}
	allowedSideEffects := supportedSideEffectClasses
	if opts.requireNoSideEffects {
		allowedSideEffects = noSideEffectClasses
	}
	if h.SideEffects == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("sideEffects"), "must specify one of "+strings.Join(allowedSideEffects, ", ")))
	} else if !slices.Contains(allowedSideEffects, string(*h.SideEffects)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("sideEffects"), *h.SideEffects, allowedSideEffects))
	}
	if t := *h.TimeoutSeconds; t != nil && (*t > 30 || *t < 1) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("timeoutSeconds"), *t, "the timeout value must be between 1 and 30 seconds"))
	}
	selectorOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidLabelValues}
	if s := *h.NamespaceSelector; s != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(s, selectorOpts, fldPath.Child("namespaceSelector"))...)
	}
	if s := *h.ObjectSelector; s != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabelSelector(s, selectorOpts, fldPath.Child("objectSelector"))...)
	}
	if h.ReinvocationPolicy != nil {
		if p := *h.ReinvocationPolicy; p != nil && !slices.Contains(supportedReinvocation, string(*p)) {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("reinvocationPolicy"), *p, supportedReinvocation))
		}
	}
	allErrs = append(allErrs, validateClientConfig(h.ClientConfig, fldPath.Child("clientConfig"))...)
	if !opts.ignoreMatchConditions {
		allErrs = append(allErrs, validateMatchConditions(h.MatchConditions, fldPath.Child("matchConditions"))...)
	}
	return allErrs
}

func hasAcceptedReviewVersion(versions []string) bool {
	for _, v := range versions {
		if slices.Contains(acceptedReviewVersions, v) {
			return true
		}
	}
	return false
}

func validateReviewVersions(versions []string, requireRecognized bool, fldPath *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(fldPath, "must specify one of "+strings.Join(acceptedReviewVersions, ", "))}
	}
	var allErrs field.ErrorList
	seen := map[string]bool{}
	for i, v := range versions {
		if seen[v] {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range validation.IsDNS1035Label(v) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), v, msg))
		}
	}
	if requireRecognized && !hasAcceptedReviewVersion(versions) {
		allErrs = append(allErrs, field.Invalid(fldPath, versions, "must include at least one of "+strings.Join(acceptedReviewVersions, ", ")))
	}
	return allErrs
}

func validateRule(rule *admissionregistrationv1.RuleWithOperations, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	opsPath := fldPath.Child("operations")
	if len(rule.Operations) == 0 {
		allErrs = append(allErrs, field.Required(opsPath, ""))
	}
	if len(rule.Operations) > 1 && slices.Contains(rule.Operations, admissionregistrationv1.OperationAll) {
		allErrs = append(allErrs, field.Invalid(opsPath, rule.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range rule.Operations {
		if !slices.Contains(supportedOperations, string(op)) {
			allErrs = append(allErrs, field.NotSupported(opsPath.Index(i), op, supportedOperations))
		}
	}
	if len(rule.APIGroups) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("apiGroups"), ""))
	}
	if len(rule.APIGroups) > 1 && slices.Contains(rule.APIGroups, "*") {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(rule.APIVersions) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("apiVersions"), ""))
	}
	if len(rule.APIVersions) > 1 && slices.Contains(rule.APIVersions, "*") {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("apiVersions"), rule.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range rule.APIVersions {
		if v == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("apiVersions").Index(i), ""))
		}
	}
	allErrs = append(allErrs, validateResources(rule.Resources, fldPath.Child("resources"))...)
	if rule.Scope != nil && !slices.Contains(supportedScopes, string(*rule.Scope)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("scope"), *rule.Scope, supportedScopes))
	}
	return allErrs
}

// validateResources checks "resource" and "resource/subresource" entries, rejecting
// lists in which a wildcard already covers another entry.
func validateResources(resources []string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(resources) == 0 {
		allErrs = append(allErrs, field.Required(fldPath, ""))
	}
	wildcardSubresources := map[string]bool{} // x/*
	wildcardResources := map[string]bool{}    // */x
	hasDoubleWildcard, hasSingleWildcard, hasPlainResource := false, false, false
	for i, entry := range resources {
		if entry == "" {
			allErrs = append(allErrs, field.Required(fldPath.Index(i), ""))
			continue
		}
		if entry == "*/*" {
			hasDoubleWildcard = true
		}
		if entry == "*" {
			hasSingleWildcard = true
		}
		res, sub, found := strings.Cut(entry, "/")
		if !found {
			hasPlainResource = entry != "*"
			continue
		}
		if wildcardSubresources[res] {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), entry, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, entry)))
		}
		if wildcardResources[sub] {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i), entry, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, entry)))
		}
		if sub == "*" {
			wildcardSubresources[res] = true
		}
		if res == "*" {
			wildcardResources[sub] = true
		}
	}
	if len(resources) > 1 && hasDoubleWildcard {
		allErrs = append(allErrs, field.Invalid(fldPath, resources, "if '*/*' is present, must not specify other resources"))
	}
	if hasSingleWildcard && hasPlainResource {
		allErrs = append(allErrs, field.Invalid(fldPath, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return allErrs
}

func validateClientConfig(cc *admissionregistrationv1.WebhookClientConfig, fldPath *field.Path) field.ErrorList {
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		return field.ErrorList{field.Required(fldPath, "exactly one of url or service is required")}
	case cc.URL != nil:
		return validateURL(*cc.URL, fldPath.Child("url"))
	}
	return validateService(cc.Service, fldPath.Child("service"))
}

// validateURL accepts only https URLs naming a host, without user, query or fragment.
func validateURL(raw string, fldPath *field.Path) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(fldPath, raw, err.Error())}
	}
	var allErrs field.ErrorList
	if u.Scheme != "https" {
		allErrs = append(allErrs, field.Invalid(fldPath, u.Scheme, "'https' is the only allowed URL scheme"))
	}
	if u.Host == "" {
		allErrs = append(allErrs, field.Invalid(fldPath, u.Host, "host must be specified"))
	}
	if u.User != nil {
		allErrs = append(allErrs, field.Invalid(fldPath, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		allErrs = append(allErrs, field.Invalid(fldPath, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		allErrs = append(allErrs, field.Invalid(fldPath, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return allErrs
}

func validateService(svc *admissionregistrationv1.ServiceReference, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if svc.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), "service name is required"))
	}
	if svc.Namespace == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("namespace"), "service namespace is required"))
	}
	port := defaultServicePort
	if svc.Port != nil {
		port = *svc.Port
	}
	if errs := validation.IsValidPortNum(int(port)); errs != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), port, "port is not valid: "+strings.Join(errs, ", ")))
	}
	if svc.Path == nil {
		return allErrs
	}
	p := *svc.Path
	pathPath := fldPath.Child("path")
	if p == "/" || p == "" {
		return allErrs
	}
	if p == "//" {
		return append(allErrs, field.Invalid(pathPath, p, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(p, "/") {
		allErrs = append(allErrs, field.Invalid(pathPath, p, "must start with a '/'"))
	}
	rest := strings.TrimSuffix(p[1:], "/")
	for i, segment := range strings.Split(rest, "/") {
		if segment == "" {
			allErrs = append(allErrs, field.Invalid(pathPath, p, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(segment) {
			allErrs = append(allErrs, field.Invalid(pathPath, p, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return allErrs
}

// validateMatchConditions checks names and that expressions are present and parse as
// CEL. Parsing catches what upstream reports as "compilation failed" syntax errors;
// type errors (an unknown function) are reported when the webhook is first matched,
// because the admission CEL environment lives in the apiserver, which registry must
// not import.
func validateMatchConditions(conditions []admissionregistrationv1.MatchCondition, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(conditions) > maxMatchConditions {
		allErrs = append(allErrs, field.TooMany(fldPath, len(conditions), maxMatchConditions))
	}
	names := map[string]bool{}
	for i, c := range conditions {
		condPath := fldPath.Index(i)
		if strings.TrimSpace(c.Expression) == "" {
			allErrs = append(allErrs, field.Required(condPath.Child("expression"), ""))
		} else if msg := celSyntaxError(c.Expression); msg != "" {
			allErrs = append(allErrs, field.Invalid(condPath.Child("expression"), c.Expression, "compilation failed: "+msg))
		}
		if c.Name == "" {
			allErrs = append(allErrs, field.Required(condPath.Child("name"), ""))
		} else {
			for _, msg := range validation.IsQualifiedName(c.Name) {
				allErrs = append(allErrs, field.Invalid(condPath.Child("name"), c.Name, msg))
			}
			if names[c.Name] {
				allErrs = append(allErrs, field.Duplicate(condPath.Child("name"), c.Name))
			}
			names[c.Name] = true
		}
	}
	return allErrs
}

// celParser parses expressions only; it declares nothing, so any syntactically valid
// expression passes.
var celParser, _ = cel.NewEnv()

// celSyntaxError is the parser's report on expr, empty when it parses.
func celSyntaxError(expr string) string {
	if celParser == nil {
		return ""
	}
	if _, iss := celParser.Parse(expr); iss != nil && iss.Err() != nil {
		return iss.Err().Error()
	}
	return ""
}
