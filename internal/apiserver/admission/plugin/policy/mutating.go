package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/cel"
	"mizzen/internal/apiserver/admission/plugin/webhook"
	"mizzen/internal/apiserver/authz"
)

// MutatingPluginName is upstream's name of the MutatingAdmissionPolicy plugin.
const MutatingPluginName = "MutatingAdmissionPolicy"

var (
	mutatingPoliciesGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicies")
	mutatingBindingsGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings")
)

// Mutating is MutatingAdmissionPolicy: each binding whose policy matches a create,
// update or connect applies the policy's mutations (an apply configuration merged
// with server-side apply's rules, or a JSON patch, each built by a CEL expression)
// for each of the binding's params, bindings in name order.
type Mutating struct {
	admission.Ops
	reader admission.Reader
	cel    *cel.Compiler
	mut    *cel.MutationCompiler
	apply  admission.ApplyMerger
	conv   admission.Converter
	authz  authz.Authorizer
}

// NewMutating returns the plugin; apply merges apply configurations into objects, conv
// converts requests for policies that match another version of their resource.
func NewMutating(r admission.Reader, c *cel.Compiler, mut *cel.MutationCompiler, apply admission.ApplyMerger, conv admission.Converter, az authz.Authorizer) *Mutating {
	return &Mutating{Ops: admission.Ops{admission.Create, admission.Update, admission.Connect}, reader: r, cel: c, mut: mut, apply: apply, conv: conv, authz: az}
}

var _ admission.Reinvoker = (*Mutating)(nil)

// Admit applies every matching binding's policy.
func (p *Mutating) Admit(ctx context.Context, a *admission.Attributes) error {
	return p.admit(ctx, a, false)
}

// Reinvoke applies once more the policies with reinvocationPolicy IfNeeded whose
// object a later mutation changed.
func (p *Mutating) Reinvoke(ctx context.Context, a *admission.Attributes) error {
	return p.admit(ctx, a, true)
}

func (p *Mutating) admit(ctx context.Context, a *admission.Attributes, reinvoking bool) error {
	if a.Internal || a.Resource.Group == admissionregistrationv1.GroupName || a.Object == nil {
		return nil
	}
	return eachBinding(ctx, p.reader, mutatingBindingsGVR, mutatingPoliciesGVR,
		func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) string { return b.Spec.PolicyName },
		func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding, pol *admissionregistrationv1.MutatingAdmissionPolicy) error {
			reinvocable := pol.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
			if reinvoking && !reinvocable {
				return nil
			}
			va, err := bound(ctx, p.reader, p.conv, pol.Spec.MatchConstraints, b.Spec.MatchResources, a)
			if err != nil || va == nil {
				return err
			}
			var params []any
			if pol.Spec.ParamKind != nil && b.Spec.ParamRef != nil {
				params, err = readParams(ctx, p.reader, pol.Spec.ParamKind, b.Spec.ParamRef, a)
				if err == errParamsMissing {
					if a := b.Spec.ParamRef.ParameterNotFoundAction; a != nil && *a == admissionregistrationv1.AllowAction {
						return nil
					}
					return p.failed(a, pol, b, fmt.Errorf("no params found for policy binding with `Deny` parameterNotFoundAction"))
				}
				if err != nil {
					return err
				}
			}
			if len(params) == 0 {
				params = []any{nil}
			}
			for i, param := range params {
				id := "policy/" + b.Name + "/" + strconv.Itoa(i)
				if reinvoking && !admission.NeedsReinvocation(ctx, id) {
					continue
				}
				// The object may have changed under an earlier param: convert it afresh.
				changed, ran, err := p.mutateIn(ctx, pol, b, param, a, va.Resource.Version)
				if err != nil {
					return err
				}
				if changed {
					admission.RecordChange(ctx)
				}
				if ran && reinvocable && !reinvoking {
					admission.RecordReinvocable(ctx, id)
				}
			}
			return nil
		})
}

// failed is failurePolicy's answer to a policy that could not be applied: nil under
// Ignore, a refusal under Fail, as upstream's policy plugins refuse: 403 with reason
// Invalid, the message naming the policy and binding, repeated as the cause.
func (p *Mutating) failed(a *admission.Attributes, pol *admissionregistrationv1.MutatingAdmissionPolicy, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, err error) error {
	if pol.Spec.FailurePolicy != nil && *pol.Spec.FailurePolicy == admissionregistrationv1.Ignore {
		return nil
	}
	msg := fmt.Sprintf("policy '%s' with binding '%s' denied request: %v", pol.Name, b.Name, err)
	st := admission.NewForbidden(a, errors.New(msg)).(*apierrors.StatusError)
	st.ErrStatus.Message, st.ErrStatus.Reason = msg, metav1.StatusReasonInvalid
	st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	return st
}

// mutateIn is mutate on the request converted to version (the one the policy's
// rules name), the result converted back.
func (p *Mutating) mutateIn(ctx context.Context, pol *admissionregistrationv1.MutatingAdmissionPolicy, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, param any, a *admission.Attributes, version string) (changed, ran bool, err error) {
	va, err := webhook.Versioned(a, p.conv, version)
	if err != nil {
		return false, false, err
	}
	changed, ran, err = p.mutate(ctx, pol, b, param, va)
	if err != nil || !changed || va == a {
		return changed, ran, err
	}
	back, _, err := p.conv.Convert(va.Object, va.Resource, a.Resource.Version)
	if err != nil {
		return changed, ran, apierrors.NewInternalError(fmt.Errorf("converting the mutation of MutatingAdmissionPolicy '%s' back to %s: %v", pol.Name, a.Resource.Version, err))
	}
	back.GetObjectKind().SetGroupVersionKind(a.Object.GetObjectKind().GroupVersionKind())
	a.Object = back
	return changed, ran, nil
}

// mutate evaluates one policy for one param: match conditions, variables, then each
// mutation in order on the object as the previous one left it. changed reports that
// the object changed, ran that the policy's mutations were evaluated.
func (p *Mutating) mutate(ctx context.Context, pol *admissionregistrationv1.MutatingAdmissionPolicy, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, param any, a *admission.Attributes) (changed, ran bool, err error) {
	vars, err := baseVars(ctx, p.reader, p.authz, a)
	if err != nil {
		return false, false, apierrors.NewInternalError(err)
	}
	vars["params"] = param
	for _, mc := range pol.Spec.MatchConditions {
		ok, err := p.cel.EvalBool(mc.Expression, vars)
		if err != nil {
			return false, false, p.failed(a, pol, b, fmt.Errorf("failed to evaluate matchCondition %q: %v", mc.Name, err))
		}
		if !ok {
			return false, false, nil
		}
	}
	variables := map[string]any{}
	vars["variables"] = variables
	for _, v := range pol.Spec.Variables {
		if val, err := p.cel.Eval(v.Expression, vars); err == nil {
			variables[v.Name] = val.Value()
		} // a mutation using it reports the error
	}
	for _, m := range pol.Spec.Mutations {
		obj, err := p.apply1(m, vars, a.Object, a.Kind)
		if err != nil {
			return changed, true, p.failed(a, pol, b, err)
		}
		if obj == nil {
			continue
		}
		changed = true
		a.Object = obj
		if vars["object"], err = cel.ToValue(obj); err != nil {
			return changed, true, apierrors.NewInternalError(err)
		}
	}
	return changed, true, nil
}

// apply1 applies one mutation to obj; nil when it leaves the object as it was.
func (p *Mutating) apply1(m admissionregistrationv1.Mutation, vars map[string]any, obj runtime.Object, kind schema.GroupVersionKind) (runtime.Object, error) {
	switch m.PatchType {
	case admissionregistrationv1.PatchTypeJSONPatch:
		if m.JSONPatch == nil {
			return nil, fmt.Errorf("jsonPatch is not set")
		}
		out, err := p.mut.Eval(m.JSONPatch.Expression, vars)
		if err != nil {
			return nil, fmt.Errorf("expression '%s' resulted in error: %v", m.JSONPatch.Expression, err)
		}
		return applyJSONPatch(out, obj)
	case admissionregistrationv1.PatchTypeApplyConfiguration:
		if m.ApplyConfiguration == nil {
			return nil, fmt.Errorf("applyConfiguration is not set")
		}
		out, err := p.mut.Eval(m.ApplyConfiguration.Expression, vars)
		if err != nil {
			return nil, fmt.Errorf("expression '%s' resulted in error: %v", m.ApplyConfiguration.Expression, err)
		}
		config, ok := out.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("applyConfiguration expression must return an Object, got %T", out)
		}
		if p.apply == nil {
			return nil, fmt.Errorf("apply configurations cannot be merged by this server")
		}
		before, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		withKind := obj.DeepCopyObject()
		withKind.GetObjectKind().SetGroupVersionKind(kind)
		merged, err := p.apply.MergeApplyConfiguration(withKind, config)
		if err != nil {
			return nil, fmt.Errorf("error applying patch: %v", err)
		}
		merged.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
		after, err := json.Marshal(merged)
		if err != nil {
			return nil, err
		}
		if string(before) == string(after) {
			return nil, nil
		}
		return merged, nil
	}
	return nil, fmt.Errorf("unsupported patchType %q", m.PatchType)
}

// applyJSONPatch applies the operations a JSONPatch expression returned.
func applyJSONPatch(out any, obj runtime.Object) (runtime.Object, error) {
	ops, ok := out.([]any)
	if !ok {
		return nil, fmt.Errorf("jsonPatch expression must return a list of JSONPatch, got %T", out)
	}
	for i, op := range ops {
		m, ok := op.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("jsonPatch[%d] is not a JSONPatch", i)
		}
		if _, ok := m["op"].(string); !ok {
			return nil, fmt.Errorf("jsonPatch[%d]: op is required", i)
		}
		if _, ok := m["path"].(string); !ok {
			return nil, fmt.Errorf("jsonPatch[%d]: path is required", i)
		}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, err
	}
	objJSON, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	patched, err := patch.Apply(objJSON)
	if err != nil {
		return nil, err
	}
	if string(patched) == string(objJSON) {
		return nil, nil
	}
	next := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(patched, next); err != nil {
		return nil, fmt.Errorf("the patch made an invalid object: %v", err)
	}
	next.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return next, nil
}
