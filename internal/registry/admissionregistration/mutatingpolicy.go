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

// mutatingPolicyResources are MutatingAdmissionPolicy and its binding, served by
// default in admissionregistration.k8s.io/v1 as upstream does since v1.36 (the
// MutatingAdmissionPolicy feature went GA there, and its plugin is on by default).
func mutatingPolicyResources() []*registry.Resource {
	return []*registry.Resource{
		{
			GroupVersion: admissionregistrationv1.SchemeGroupVersion,
			Resource:     "mutatingadmissionpolicies",
			Kind:         "MutatingAdmissionPolicy",
			SingularName: "mutatingadmissionpolicy",
			Categories:   []string{"api-extensions"},
			New:          func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyList{} },
			Strategy:     mutatingPolicyStrategy{},
			Printer: &registry.Printer{
				Columns: []metav1.TableColumnDefinition{
					registry.NameColumn,
					{Name: "Mutations", Type: "integer", Description: "Mutations indicates the number of mutations rules defined in this configuration"},
					{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy"},
					registry.AgeColumn,
				},
				Row: func(obj runtime.Object) []interface{} {
					p := obj.(*admissionregistrationv1.MutatingAdmissionPolicy)
					kind := "<unset>"
					if pk := p.Spec.ParamKind; pk != nil {
						kind = pk.APIVersion + "/" + pk.Kind
					}
					return []interface{}{p.Name, int64(len(p.Spec.Mutations)), kind, registry.Age(p.CreationTimestamp)}
				},
			},
		},
		{
			GroupVersion: admissionregistrationv1.SchemeGroupVersion,
			Resource:     "mutatingadmissionpolicybindings",
			Kind:         "MutatingAdmissionPolicyBinding",
			SingularName: "mutatingadmissionpolicybinding",
			Categories:   []string{"api-extensions"},
			New:          func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBindingList{} },
			Strategy:     mutatingBindingStrategy{},
			Printer: &registry.Printer{
				Columns: []metav1.TableColumnDefinition{
					registry.NameColumn,
					{Name: "PolicyName", Type: "string", Description: "PolicyName references a MutatingAdmissionPolicy name which the MutatingAdmissionPolicyBinding binds to"},
					{Name: "ParamRef", Type: "string", Description: "ParamRef specifies the parameter resource used to configure the admission control policy"},
					registry.AgeColumn,
				},
				Row: func(obj runtime.Object) []interface{} {
					b := obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding)
					return []interface{}{b.Name, b.Spec.PolicyName, paramRefColumn(b.Spec.ParamRef), registry.Age(b.CreationTimestamp)}
				},
			},
		},
	}
}

// paramRefColumn is the ParamRef column of both binding kinds.
func paramRefColumn(pr *admissionregistrationv1.ParamRef) string {
	switch {
	case pr == nil:
	case pr.Name != "" && pr.Namespace != "":
		return pr.Namespace + "/" + pr.Name
	case pr.Name != "":
		return pr.Name
	case pr.Selector != nil:
		return metav1.FormatLabelSelector(pr.Selector)
	}
	return "<unset>"
}

type mutatingPolicyStrategy struct{ registry.BaseStrategy }

func (mutatingPolicyStrategy) Default(obj runtime.Object) {
	p := obj.(*admissionregistrationv1.MutatingAdmissionPolicy)
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

func (mutatingPolicyStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*admissionregistrationv1.MutatingAdmissionPolicy).Generation = 1
}

func (mutatingPolicyStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateMutatingPolicy(obj.(*admissionregistrationv1.MutatingAdmissionPolicy))
}

func (mutatingPolicyStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateMutatingPolicy(obj.(*admissionregistrationv1.MutatingAdmissionPolicy))
}

func validateMutatingPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if p.Spec.MatchConstraints == nil {
		errs = append(errs, field.Required(spec.Child("matchConstraints"), "must be specified"))
	} else {
		if len(p.Spec.MatchConstraints.ResourceRules) == 0 {
			errs = append(errs, field.Required(spec.Child("matchConstraints", "resourceRules"), ""))
		}
		errs = append(errs, validateMutatingOperations(p.Spec.MatchConstraints, spec.Child("matchConstraints"))...)
	}
	if len(p.Spec.Mutations) == 0 {
		errs = append(errs, field.Required(spec.Child("mutations"), "mutations must contain at least one item"))
	}
	for i, m := range p.Spec.Mutations {
		mp := spec.Child("mutations").Index(i)
		switch m.PatchType {
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil {
				errs = append(errs, field.Required(mp.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
			} else if strings.TrimSpace(m.ApplyConfiguration.Expression) == "" {
				errs = append(errs, field.Required(mp.Child("applyConfiguration", "expression"), ""))
			}
			if m.JSONPatch != nil {
				errs = append(errs, field.Invalid(mp.Child("jsonPatch"), "{...}", "must not be specified when patchType is ApplyConfiguration"))
			}
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil {
				errs = append(errs, field.Required(mp.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
			} else if strings.TrimSpace(m.JSONPatch.Expression) == "" {
				errs = append(errs, field.Required(mp.Child("jsonPatch", "expression"), ""))
			}
			if m.ApplyConfiguration != nil {
				errs = append(errs, field.Invalid(mp.Child("applyConfiguration"), "{...}", "must not be specified when patchType is JSONPatch"))
			}
		case "":
			errs = append(errs, field.Required(mp.Child("patchType"), ""))
		default:
			errs = append(errs, field.NotSupported(mp.Child("patchType"), m.PatchType, []string{string(admissionregistrationv1.PatchTypeApplyConfiguration), string(admissionregistrationv1.PatchTypeJSONPatch)}))
		}
	}
	switch p.Spec.ReinvocationPolicy {
	case admissionregistrationv1.NeverReinvocationPolicy, admissionregistrationv1.IfNeededReinvocationPolicy:
	case "":
		errs = append(errs, field.Required(spec.Child("reinvocationPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(spec.Child("reinvocationPolicy"), p.Spec.ReinvocationPolicy, []string{"IfNeeded", "Never"}))
	}
	for i, v := range p.Spec.Variables {
		if strings.TrimSpace(v.Name) == "" {
			errs = append(errs, field.Required(spec.Child("variables").Index(i).Child("name"), ""))
		}
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, field.Required(spec.Child("variables").Index(i).Child("expression"), ""))
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

// validateMutatingOperations refuses DELETE in a mutating policy's rules: there is
// no object to mutate.
func validateMutatingOperations(m *admissionregistrationv1.MatchResources, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range m.ResourceRules {
		for j, op := range r.Operations {
			if op == admissionregistrationv1.Delete {
				errs = append(errs, field.NotSupported(p.Child("resourceRules").Index(i).Child("operations").Index(j), op,
					[]string{string(admissionregistrationv1.Create), string(admissionregistrationv1.Update), string(admissionregistrationv1.Connect), string(admissionregistrationv1.OperationAll)}))
			}
		}
	}
	return errs
}

type mutatingBindingStrategy struct{ registry.BaseStrategy }

func (mutatingBindingStrategy) Default(obj runtime.Object) {
	defaultMatchResources(obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding).Spec.MatchResources)
}

func (mutatingBindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateMutatingBinding(obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding))
}

func (mutatingBindingStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateMutatingBinding(obj.(*admissionregistrationv1.MutatingAdmissionPolicyBinding))
}

func validateMutatingBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(spec.Child("policyName"), ""))
	}
	if m := b.Spec.MatchResources; m != nil {
		errs = append(errs, validateMutatingOperations(m, spec.Child("matchResources"))...)
	}
	return append(errs, validateParamRef(b.Spec.ParamRef, spec.Child("paramRef"))...)
}
