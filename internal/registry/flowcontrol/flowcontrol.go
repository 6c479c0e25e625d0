// Package flowcontrol describes the flowcontrol.apiserver.k8s.io/v1 resources, FlowSchemas
// and PriorityLevelConfigurations (API Priority and Fairness), and the configuration
// objects every cluster starts with.
//
// mizzen serves, defaults and validates them as upstream does, but its apiserver does not
// classify or queue requests by them: they are configuration a client can read and write.
// docs/flowcontrol.md says what that means for a user.
package flowcontrol

import (
	"context"
	"fmt"
	"math"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"mizzen/internal/registry"
)

var groupVersion = flowcontrolv1.SchemeGroupVersion

// Resources returns the flowcontrol.apiserver.k8s.io/v1 resources.
func Resources() []*registry.Resource {
	return []*registry.Resource{flowSchemas(), priorityLevels()}
}

func flowSchemas() *registry.Resource {
	doc := flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "flowschemas",
		Kind:         "FlowSchema",
		SingularName: "flowschema",
		HasStatus:    true,
		New:          func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
		NewList:      func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		Strategy:     flowSchemaStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "PriorityLevel", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]},
				{Name: "MatchingPrecedence", Type: "string", Description: doc["matchingPrecedence"]},
				{Name: "DistinguisherMethod", Type: "string", Description: doc["distinguisherMethod"]},
				registry.AgeColumn,
				{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration"},
			},
			Row: func(obj runtime.Object) []interface{} {
				fs := obj.(*flowcontrolv1.FlowSchema)
				method := "<none>"
				if fs.Spec.DistinguisherMethod != nil {
					method = string(fs.Spec.DistinguisherMethod.Type)
				}
				missing := "?"
				for _, c := range fs.Status.Conditions {
					if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
						missing = string(c.Status)
					}
				}
				return []interface{}{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, int64(fs.Spec.MatchingPrecedence),
					method, registry.Age(fs.CreationTimestamp), missing}
			},
		},
	}
}

func priorityLevels() *registry.Resource {
	doc := flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: groupVersion,
		Resource:     "prioritylevelconfigurations",
		Kind:         "PriorityLevelConfiguration",
		SingularName: "prioritylevelconfiguration",
		HasStatus:    true,
		New:          func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		NewList:      func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
		Strategy:     priorityLevelStrategy{},
		Printer: &registry.Printer{
			Columns: []metav1.TableColumnDefinition{
				registry.NameColumn,
				{Name: "Type", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]},
				{Name: "NominalConcurrencyShares", Type: "string", Description: flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]},
				{Name: "Queues", Type: "string", Description: doc["queues"]},
				{Name: "HandSize", Type: "string", Description: doc["handSize"]},
				{Name: "QueueLengthLimit", Type: "string", Description: doc["queueLengthLimit"]},
				registry.AgeColumn,
			},
			Row: func(obj runtime.Object) []interface{} {
				pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
				var shares, queues, handSize, queueLength interface{} = "<none>", "<none>", "<none>", "<none>"
				if l := pl.Spec.Limited; l != nil {
					shares = int64(ptr.Deref(l.NominalConcurrencyShares, 0))
					if q := l.LimitResponse.Queuing; q != nil {
						queues, handSize, queueLength = int64(q.Queues), int64(q.HandSize), int64(q.QueueLengthLimit)
					}
				}
				return []interface{}{pl.Name, string(pl.Spec.Type), shares, queues, handSize, queueLength, registry.Age(pl.CreationTimestamp)}
			},
		},
	}
}

// ---------------------------------------------------------------- FlowSchema

// maxMatchingPrecedence is the largest matchingPrecedence; 1 is the exempt schema's alone.
const maxMatchingPrecedence = 10000

type flowSchemaStrategy struct{ registry.BaseStrategy }

// Default: a schema without a precedence gets 1000, as upstream's v1 defaulting.
func (flowSchemaStrategy) Default(obj runtime.Object) {
	fs := obj.(*flowcontrolv1.FlowSchema)
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = 1000
	}
}

func (flowSchemaStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateFlowSchema(obj.(*flowcontrolv1.FlowSchema))
}

func (flowSchemaStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateFlowSchema(obj.(*flowcontrolv1.FlowSchema))
}

func validateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	spec, specPath := &fs.Spec, field.NewPath("spec")
	var allErrs field.ErrorList
	precedence := specPath.Child("matchingPrecedence")
	switch {
	case spec.MatchingPrecedence <= 0:
		allErrs = append(allErrs, field.Invalid(precedence, spec.MatchingPrecedence, "must be a positive value"))
	case spec.MatchingPrecedence > maxMatchingPrecedence:
		allErrs = append(allErrs, field.Invalid(precedence, spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %d", maxMatchingPrecedence)))
	case spec.MatchingPrecedence == 1 && fs.Name != flowcontrolv1.FlowSchemaNameExempt:
		allErrs = append(allErrs, field.Invalid(precedence, spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if m := spec.DistinguisherMethod; m != nil && m.Type != flowcontrolv1.FlowDistinguisherMethodByUserType && m.Type != flowcontrolv1.FlowDistinguisherMethodByNamespaceType {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("distinguisherMethod", "type"), m.Type,
			[]string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}))
	}
	plName := specPath.Child("priorityLevelConfiguration", "name")
	if spec.PriorityLevelConfiguration.Name == "" {
		allErrs = append(allErrs, field.Required(plName, "must reference a priority level"))
	}
	for _, msg := range dnsSubdomain(spec.PriorityLevelConfiguration.Name) {
		allErrs = append(allErrs, field.Invalid(plName, spec.PriorityLevelConfiguration.Name, msg))
	}
	for i := range spec.Rules {
		allErrs = append(allErrs, validateRule(&spec.Rules[i], specPath.Child("rules").Index(i))...)
	}
	if mandatory := MandatoryFlowSchema(fs.Name); mandatory != nil && !apiequality.Semantic.DeepEqual(fs.Spec, mandatory.Spec) {
		allErrs = append(allErrs, field.Invalid(specPath, fs.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	return append(allErrs, validateConditionTypes(flowSchemaConditionTypes(fs.Status.Conditions), field.NewPath("status", "conditions"))...)
}

// dnsSubdomain is the name rule of both kinds; an empty name is reported by the caller.
func dnsSubdomain(name string) []string {
	if name == "" {
		return nil
	}
	return apimachineryvalidation.NameIsDNSSubdomain(name, false)
}

func validateRule(rule *flowcontrolv1.PolicyRulesWithSubjects, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(rule.Subjects) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		allErrs = append(allErrs, validateSubject(&rule.Subjects[i], fldPath.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range rule.ResourceRules {
		allErrs = append(allErrs, validateResourceRule(&rule.ResourceRules[i], fldPath.Child("resourceRules").Index(i))...)
	}
	for i := range rule.NonResourceRules {
		allErrs = append(allErrs, validateNonResourceRule(&rule.NonResourceRules[i], fldPath.Child("nonResourceRules").Index(i))...)
	}
	return allErrs
}

func validateSubject(s *flowcontrolv1.Subject, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	// Exactly the member named by the kind may be set.
	forbidden := func(present bool, member, kind string) {
		if present {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(member), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", member, kind)))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("user", "name"), ""))
		}
		forbidden(s.Group != nil, "group", "Group")
		forbidden(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("group", "name"), ""))
		}
		forbidden(s.User != nil, "user", "User")
		forbidden(s.ServiceAccount != nil, "serviceAccount", "ServiceAccount")
	case flowcontrolv1.SubjectKindServiceAccount:
		allErrs = append(allErrs, validateServiceAccountSubject(s.ServiceAccount, fldPath.Child("serviceAccount"))...)
		forbidden(s.User != nil, "user", "User")
		forbidden(s.Group != nil, "group", "Group")
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("kind"), s.Kind,
			[]string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}))
	}
	return allErrs
}

func validateServiceAccountSubject(sa *flowcontrolv1.ServiceAccountSubject, fldPath *field.Path) field.ErrorList {
	if sa == nil {
		return field.ErrorList{field.Required(fldPath, "serviceAccount is required when subject kind is 'ServiceAccount'")}
	}
	var allErrs field.ErrorList
	if sa.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else if sa.Name != flowcontrolv1.NameAll {
		for _, msg := range apimachineryvalidation.ValidateServiceAccountName(sa.Name, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), sa.Name, msg))
		}
	}
	if sa.Namespace == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("namespace"), "must specify namespace for service account"))
	} else {
		for _, msg := range apimachineryvalidation.ValidateNamespaceName(sa.Namespace, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("namespace"), sa.Namespace, msg))
		}
	}
	return allErrs
}

// supportedVerbs are the verbs a rule may name besides "*".
var supportedVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}

func validateVerbs(verbs []string, fldPath *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(fldPath, "verbs must contain at least one value")}
	case contains(verbs, flowcontrolv1.VerbAll):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(fldPath, verbs, "if '*' is present, must not specify other verbs")}
		}
	default:
		for _, v := range verbs {
			if !contains(supportedVerbs, v) {
				return field.ErrorList{field.NotSupported(fldPath, verbs, supportedVerbs)}
			}
		}
	}
	return nil
}

func validateResourceRule(rule *flowcontrolv1.ResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	allErrs := validateVerbs(rule.Verbs, fldPath.Child("verbs"))
	if len(rule.APIGroups) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && contains(rule.APIGroups, flowcontrolv1.APIGroupAll) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && contains(rule.Resources, flowcontrolv1.ResourceAll) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	namespaces := fldPath.Child("namespaces")
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		allErrs = append(allErrs, field.Required(namespaces, "resource rules that are not cluster scoped must supply at least one namespace"))
	case contains(rule.Namespaces, flowcontrolv1.NamespaceEvery):
		if len(rule.Namespaces) > 1 {
			allErrs = append(allErrs, field.Invalid(namespaces, rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, ns := range rule.Namespaces {
			for _, msg := range apimachineryvalidation.ValidateNamespaceName(ns, false) {
				allErrs = append(allErrs, field.Invalid(namespaces.Index(i), ns, "each member of this list must be '*' or a DNS-1123 label; "+msg))
			}
		}
	}
	return allErrs
}

func validateNonResourceRule(rule *flowcontrolv1.NonResourcePolicyRule, fldPath *field.Path) field.ErrorList {
	allErrs := validateVerbs(rule.Verbs, fldPath.Child("verbs"))
	urls := fldPath.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		allErrs = append(allErrs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case contains(rule.NonResourceURLs, flowcontrolv1.NonResourceAll):
		if len(rule.NonResourceURLs) > 1 {
			allErrs = append(allErrs, field.Invalid(urls, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, url := range rule.NonResourceURLs {
			if msg := nonResourceURLProblem(url); msg != "" {
				allErrs = append(allErrs, field.Invalid(urls.Index(i), url, msg))
			}
		}
	}
	return allErrs
}

// nonResourceURLProblem says what is wrong with a non-resource URL pattern: it is a
// path from the root, and a "*" may only end it as "/*" (matching anything below).
func nonResourceURLProblem(path string) string {
	switch {
	case path == "":
		return "must not be empty"
	case path == "/":
		return ""
	case !strings.HasPrefix(path, "/"):
		return "must start with slash"
	case strings.Contains(path, " "):
		return "must not contain white-space"
	case strings.Contains(path, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(path, "*"); n > 1 || n == 1 && !strings.HasSuffix(path, "/*") {
		return "wildcard can only do suffix matching"
	}
	return ""
}

func flowSchemaConditionTypes(conds []flowcontrolv1.FlowSchemaCondition) []string {
	types := make([]string, len(conds))
	for i, c := range conds {
		types[i] = string(c.Type)
	}
	return types
}

// validateConditionTypes: each condition has a type, and no type appears twice.
func validateConditionTypes(types []string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := map[string]bool{}
	for i, t := range types {
		if seen[t] {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i).Child("type"), t))
		}
		seen[t] = true
		if t == "" {
			allErrs = append(allErrs, field.Required(fldPath.Index(i).Child("type"), "must not be empty"))
		}
	}
	return allErrs
}

// ---------------------------------------------------------------- PriorityLevelConfiguration

// Upstream's v1 defaults for a limited level and for queuing.
const (
	defaultNominalConcurrencyShares = 30
	defaultQueues                   = 64
	defaultHandSize                 = 8
	defaultQueueLengthLimit         = 50
	maxQueues                       = 10 * 1000 * 1000
	// maxHashBits bounds the entropy shuffle sharding may need to deal a hand.
	maxHashBits = 60
)

type priorityLevelStrategy struct{ registry.BaseStrategy }

func (priorityLevelStrategy) Default(obj runtime.Object) {
	spec := &obj.(*flowcontrolv1.PriorityLevelConfiguration).Spec
	if e := spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To[int32](0)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To[int32](0)
		}
	}
	l := spec.Limited
	if l == nil {
		return
	}
	// A nil share count means the default; an explicit 0 stays 0 (v1 allows it).
	if l.NominalConcurrencyShares == nil {
		l.NominalConcurrencyShares = ptr.To[int32](defaultNominalConcurrencyShares)
	}
	if l.LendablePercent == nil {
		l.LendablePercent = ptr.To[int32](0)
	}
	if q := l.LimitResponse.Queuing; q != nil {
		if q.Queues == 0 {
			q.Queues = defaultQueues
		}
		if q.HandSize == 0 {
			q.HandSize = defaultHandSize
		}
		if q.QueueLengthLimit == 0 {
			q.QueueLengthLimit = defaultQueueLengthLimit
		}
	}
}

func (priorityLevelStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validatePriorityLevel(obj.(*flowcontrolv1.PriorityLevelConfiguration))
}

func (priorityLevelStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validatePriorityLevel(obj.(*flowcontrolv1.PriorityLevelConfiguration))
}

func validatePriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	spec, specPath := &pl.Spec, field.NewPath("spec")
	var allErrs field.ErrorList
	if (pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		allErrs = append(allErrs, field.Invalid(specPath.Child("type"), spec.Type, "type must be 'Exempt' if and only if name is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("limited"), "must be nil if the type is not Limited"))
		}
		if e := spec.Exempt; e != nil {
			allErrs = append(allErrs, validateShares(e.NominalConcurrencyShares, e.LendablePercent, specPath.Child("exempt"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("exempt"), "must be nil if the type is Limited"))
		}
		if spec.Limited == nil {
			allErrs = append(allErrs, field.Required(specPath.Child("limited"), "must not be empty when type is Limited"))
		} else {
			allErrs = append(allErrs, validateLimited(spec.Limited, specPath.Child("limited"))...)
		}
	default:
		allErrs = append(allErrs, field.NotSupported(specPath.Child("type"), spec.Type,
			[]string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}))
	}
	if mandatory := MandatoryPriorityLevel(pl.Name); mandatory != nil && !apiequality.Semantic.DeepEqual(pl.Spec, mandatory.Spec) {
		allErrs = append(allErrs, field.Invalid(specPath, pl.Spec, fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)))
	}
	types := make([]string, len(pl.Status.Conditions))
	for i, c := range pl.Status.Conditions {
		types[i] = string(c.Type)
	}
	return append(allErrs, validateConditionTypes(types, field.NewPath("status", "conditions"))...)
}

func validateShares(shares, lendable *int32, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if shares != nil && *shares < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nominalConcurrencyShares"), *shares, "must be a non-negative integer"))
	}
	if lendable != nil && (*lendable < 0 || *lendable > 100) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("lendablePercent"), *lendable, "must be between 0 and 100, inclusive"))
	}
	return allErrs
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, fldPath *field.Path) field.ErrorList {
	allErrs := validateShares(l.NominalConcurrencyShares, l.LendablePercent, fldPath)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	lr, lrPath := l.LimitResponse, fldPath.Child("limitResponse")
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			allErrs = append(allErrs, field.Forbidden(lrPath.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			allErrs = append(allErrs, field.Required(lrPath.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited"))
		} else {
			allErrs = append(allErrs, validateQueuing(lr.Queuing, lrPath.Child("queuing"))...)
		}
	default:
		allErrs = append(allErrs, field.NotSupported(lrPath.Child("type"), lr.Type,
			[]string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}))
	}
	return allErrs
}

func validateQueuing(q *flowcontrolv1.QueuingConfiguration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case entropyBits(q.Queues, q.HandSize) > maxHashBits:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("handSize"), q.HandSize,
			fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, maxHashBits)))
	}
	return allErrs
}

// entropyBits is how many bits of hash dealing a hand of handSize from deckSize queues
// needs: handSize draws of log2(deckSize) bits each, rounded up.
func entropyBits(deckSize, handSize int32) int {
	return int(math.Ceil(float64(handSize) * math.Log2(float64(deckSize))))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
