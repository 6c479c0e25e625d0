package admissionregistration

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// policyResources are ValidatingAdmissionPolicy and MutatingAdmissionPolicy with their
// bindings, served by default in admissionregistration.k8s.io/v1 as upstream.
func policyResources() []*registry.Resource {
	return append([]*registry.Resource{
		{
			GroupVersion: admissionregistrationv1.SchemeGroupVersion,
			Resource:     "validatingadmissionpolicies",
			Kind:         "ValidatingAdmissionPolicy",
			SingularName: "validatingadmissionpolicy",
			Categories:   []string{"api-extensions"},
			New:          func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyList{} },
			Strategy:     policyStrategy{},
			HasStatus:    true,
			Printer: &registry.Printer{
				Columns: []metav1.TableColumnDefinition{
					registry.NameColumn,
					{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration"},
					{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
					registry.AgeColumn,
				},
				Row: func(obj runtime.Object) []interface{} {
					p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
					kind := "<unset>"
					if pk := p.Spec.ParamKind; pk != nil {
						kind = pk.APIVersion + "/" + pk.Kind
					}
					return []interface{}{p.Name, int64(len(p.Spec.Validations)), kind, registry.Age(p.CreationTimestamp)}
				},
			},
		},
		{
			GroupVersion: admissionregistrationv1.SchemeGroupVersion,
			Resource:     "validatingadmissionpolicybindings",
			Kind:         "ValidatingAdmissionPolicyBinding",
			SingularName: "validatingadmissionpolicybinding",
			Categories:   []string{"api-extensions"},
			New:          func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{} },
			Strategy:     bindingStrategy{},
			Printer: &registry.Printer{
				Columns: []metav1.TableColumnDefinition{
					registry.NameColumn,
					{Name: "PolicyName", Type: "string", Description: "PolicyName references a ValidatingAdmissionPolicy name which the ValidatingAdmissionPolicyBinding binds to"},
					{Name: "ParamRef", Type: "string", Description: "ParamRef specifies the parameter resource used to configure the admission control policy"},
					registry.AgeColumn,
				},
				Row: func(obj runtime.Object) []interface{} {
					b := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
					return []interface{}{b.Name, b.Spec.PolicyName, paramRefColumn(b.Spec.ParamRef), registry.Age(b.CreationTimestamp)}
				},
			},
		},
	}, mutatingPolicyResources()...)
}

type policyStrategy struct{ registry.BaseStrategy }

func (policyStrategy) Default(obj runtime.Object) {
	p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		eq := admissionregistrationv1.Equivalent
		m.MatchPolicy = &eq
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, list := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range list {
			if list[i].Scope == nil {
				all := admissionregistrationv1.AllScopes
				list[i].Scope = &all
			}
		}
	}
}

func (policyStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	p := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	p.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	p.Generation = 1
}

func (policyStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validatePolicy(obj.(*admissionregistrationv1.ValidatingAdmissionPolicy))
}

func (policyStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validatePolicy(obj.(*admissionregistrationv1.ValidatingAdmissionPolicy))
}

func validatePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if p.Spec.MatchConstraints == nil {
		errs = append(errs, field.Required(spec.Child("matchConstraints"), "must be specified"))
	} else if len(p.Spec.MatchConstraints.ResourceRules) == 0 {
		errs = append(errs, field.Required(spec.Child("matchConstraints", "resourceRules"), ""))
	}
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(spec.Child("validations"), "validations or auditAnnotations must contain at least one item"))
	}
	for i, v := range p.Spec.Validations {
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(spec.Child("validations").Index(i).Child("expression"), ""))
		}
	}
	if pk := p.Spec.ParamKind; pk != nil {
		if pk.Kind == "" {
			errs = append(errs, field.Required(spec.Child("paramKind", "kind"), ""))
		}
		if pk.APIVersion == "" {
			errs = append(errs, field.Required(spec.Child("paramKind", "apiVersion"), ""))
		}
	}
	if fp := p.Spec.FailurePolicy; fp != nil && *fp != admissionregistrationv1.Fail && *fp != admissionregistrationv1.Ignore {
		errs = append(errs, field.NotSupported(spec.Child("failurePolicy"), *fp, []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}))
	}
	return errs
}

type bindingStrategy struct{ registry.BaseStrategy }

func (bindingStrategy) Default(obj runtime.Object) {
	defaultMatchResources(obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).Spec.MatchResources)
}

func (bindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateBinding(obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding))
}

func (bindingStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateBinding(obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding))
}

func validateBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(spec.Child("policyName"), ""))
	}
	if len(b.Spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(spec.Child("validationActions"), ""))
	}
	seen := map[admissionregistrationv1.ValidationAction]bool{}
	for i, a := range b.Spec.ValidationActions {
		p := spec.Child("validationActions").Index(i)
		switch a {
		case admissionregistrationv1.Deny, admissionregistrationv1.Warn, admissionregistrationv1.Audit:
		default:
			errs = append(errs, field.NotSupported(p, a, []string{"Audit", "Deny", "Warn"}))
		}
		if seen[a] {
			errs = append(errs, field.Duplicate(p, a))
		}
		seen[a] = true
	}
	if seen[admissionregistrationv1.Deny] && seen[admissionregistrationv1.Warn] {
		errs = append(errs, field.Invalid(spec.Child("validationActions"), b.Spec.ValidationActions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	return append(errs, validateParamRef(b.Spec.ParamRef, spec.Child("paramRef"))...)
}

// validateParamRef checks a binding's paramRef, of either policy kind.
func validateParamRef(pr *admissionregistrationv1.ParamRef, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pr == nil {
		return nil
	}
	if pr.Name != "" && pr.Selector != nil {
		errs = append(errs, field.Forbidden(p.Child("name"), "name and selector are mutually exclusive"))
	}
	if pr.Name == "" && pr.Selector == nil {
		errs = append(errs, field.Required(p, "one of name or selector must be specified"))
	}
	if pr.ParameterNotFoundAction == nil {
		errs = append(errs, field.Required(p.Child("parameterNotFoundAction"), ""))
	} else if a := *pr.ParameterNotFoundAction; a != admissionregistrationv1.DenyAction && a != admissionregistrationv1.AllowAction {
		errs = append(errs, field.NotSupported(p.Child("parameterNotFoundAction"), a, []string{"Allow", "Deny"}))
	}
	return errs
}
