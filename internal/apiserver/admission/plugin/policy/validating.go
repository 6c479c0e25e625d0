// Package policy is upstream's ValidatingAdmissionPolicy plugin: each binding applies
// its policy's CEL validations to the requests both match, with the binding's params,
// and Denies, Warns or (for audit) only records what fails.
package policy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/cel"
	"mizzen/internal/apiserver/admission/plugin/webhook"
	"mizzen/internal/apiserver/authz"
)

// PluginName is upstream's name.
const PluginName = "ValidatingAdmissionPolicy"

var (
	policiesGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")
	bindingsGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings")
)

// Plugin is ValidatingAdmissionPolicy.
type Plugin struct {
	admission.Ops
	reader admission.Reader
	cel    *cel.Compiler
	conv   admission.Converter
	authz  authz.Authorizer
}

// New returns the plugin; conv converts requests for policies that match another
// version of their resource (nil: none do), az answers the expressions' authorizer
// checks (nil allows everything).
func New(r admission.Reader, c *cel.Compiler, conv admission.Converter, az authz.Authorizer) *Plugin {
	return &Plugin{Ops: admission.Ops{admission.Create, admission.Update, admission.Delete, admission.Connect}, reader: r, cel: c, conv: conv, authz: az}
}

var _ admission.Validator = (*Plugin)(nil)

// Validate applies every binding whose policy matches the request.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Internal || a.Resource.Group == admissionregistrationv1.GroupName {
		return nil
	}
	return eachBinding(ctx, p.reader, bindingsGVR, policiesGVR,
		func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string { return b.Spec.PolicyName },
		func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, pol *admissionregistrationv1.ValidatingAdmissionPolicy) error {
			va, err := bound(ctx, p.reader, p.conv, pol.Spec.MatchConstraints, b.Spec.MatchResources, a)
			if err != nil || va == nil {
				return err
			}
			vars, err := baseVars(ctx, p.reader, p.authz, va)
			if err != nil {
				return apierrors.NewInternalError(err)
			}
			if pol.Spec.ParamKind != nil && b.Spec.ParamRef == nil {
				return p.deny(a, pol, b, "policy has a paramKind but its binding has no paramRef", metav1.StatusReasonInvalid)
			}
			params, err := readParams(ctx, p.reader, pol.Spec.ParamKind, b.Spec.ParamRef, a)
			if err != nil {
				if err == errParamsMissing {
					if b.Spec.ParamRef.ParameterNotFoundAction != nil && *b.Spec.ParamRef.ParameterNotFoundAction == admissionregistrationv1.AllowAction {
						return nil
					}
					return p.deny(a, pol, b, "no params found for policy binding with `Deny` parameterNotFoundAction", metav1.StatusReasonInvalid)
				}
				return err
			}
			if len(params) == 0 {
				params = []any{nil}
			}
			for _, param := range params {
				if err := p.evaluate(ctx, a, pol, b, withParams(vars, param)); err != nil {
					return err
				}
			}
			return nil
		})
}

// eachBinding calls f, in the bindings' name order, for every binding of a policy
// that exists, with that policy: the skeleton both policy plugins run. It stops at
// f's first error.
func eachBinding[B interface {
	runtime.Object
	GetName() string
}, P runtime.Object](ctx context.Context, r admission.Reader, bindingsGVR, policiesGVR schema.GroupVersionResource, policyName func(B) string, f func(B, P) error) error {
	objs, err := r.List(ctx, bindingsGVR, "")
	if err != nil {
		return err
	}
	bindings := make([]B, 0, len(objs))
	for _, o := range objs {
		bindings = append(bindings, o.(B))
	}
	sort.Slice(bindings, func(i, j int) bool { return bindings[i].GetName() < bindings[j].GetName() })
	for _, b := range bindings {
		obj, err := r.Get(ctx, policiesGVR, "", policyName(b))
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := f(b, obj.(P)); err != nil {
			return err
		}
	}
	return nil
}

var errParamsMissing = fmt.Errorf("params missing")

func withParams(base map[string]any, params any) map[string]any {
	out := make(map[string]any, len(base)+1)
	for k, v := range base {
		out[k] = v
	}
	out["params"] = params
	return out
}

// evaluate runs a policy's match conditions, variables and validations.
func (p *Plugin) evaluate(ctx context.Context, a *admission.Attributes, pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, vars map[string]any) error {
	ignore := pol.Spec.FailurePolicy != nil && *pol.Spec.FailurePolicy == admissionregistrationv1.Ignore
	for _, mc := range pol.Spec.MatchConditions {
		ok, err := p.cel.EvalBool(mc.Expression, vars)
		if err != nil {
			if ignore {
				return nil
			}
			return p.deny(a, pol, b, fmt.Sprintf("failed to evaluate matchCondition %q: %v", mc.Name, err), metav1.StatusReasonInvalid)
		}
		if !ok {
			return nil
		}
	}
	variables := map[string]any{}
	vars["variables"] = variables
	for _, v := range pol.Spec.Variables {
		val, err := p.cel.Eval(v.Expression, vars)
		if err != nil {
			continue // a validation using it reports the error
		}
		variables[v.Name] = val.Value()
	}
	for _, v := range pol.Spec.Validations {
		ok, err := p.cel.EvalBool(v.Expression, vars)
		msg := ""
		switch {
		case err != nil:
			if ignore {
				continue
			}
			msg = fmt.Sprintf("expression '%s' resulted in error: %v", v.Expression, err)
		case ok:
			continue
		default:
			msg = v.Message
			if v.MessageExpression != "" {
				if m, err := p.cel.EvalString(v.MessageExpression, vars); err == nil && strings.TrimSpace(m) != "" && !strings.Contains(m, "\n") {
					msg = m
				}
			}
			if msg == "" {
				msg = fmt.Sprintf("failed expression: %s", v.Expression)
			}
		}
		reason := metav1.StatusReasonInvalid
		if v.Reason != nil {
			reason = *v.Reason
		}
		for _, action := range b.Spec.ValidationActions {
			switch action {
			case admissionregistrationv1.Deny:
				return p.deny(a, pol, b, msg, reason)
			case admissionregistrationv1.Warn:
				admission.AddWarning(ctx, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", pol.Name, b.Name, msg))
			}
		}
	}
	return nil
}

// deny is upstream's refusal: a Forbidden naming the request's object whose reason and
// code follow the validation's reason, the message repeated as its cause.
func (p *Plugin) deny(a *admission.Attributes, pol *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, msg string, reason metav1.StatusReason) error {
	code := int32(http.StatusUnprocessableEntity)
	switch reason {
	case metav1.StatusReasonForbidden:
		code = http.StatusForbidden
	case metav1.StatusReasonUnauthorized:
		code = http.StatusUnauthorized
	case metav1.StatusReasonRequestEntityTooLarge:
		code = http.StatusRequestEntityTooLarge
	}
	message := fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", pol.Name, b.Name, msg)
	st := admission.NewForbidden(a, errors.New(message)).(*apierrors.StatusError)
	st.ErrStatus.Reason, st.ErrStatus.Code = reason, code
	st.ErrStatus.Details.Causes = append(st.ErrStatus.Details.Causes, metav1.StatusCause{Message: message})
	return st
}

// bound applies a policy's match constraints and its binding's match resources (if it
// has them) to a request; it returns the request as the policy sees it (converted to
// the version the constraints name), nil when either does not match.
func bound(ctx context.Context, reader admission.Reader, conv admission.Converter, constraints, binding *admissionregistrationv1.MatchResources, a *admission.Attributes) (*admission.Attributes, error) {
	version, ok, err := matchResources(ctx, reader, conv, constraints, a)
	if err != nil || !ok {
		return nil, err
	}
	if binding != nil {
		if _, ok, err := matchResources(ctx, reader, conv, binding, a); err != nil || !ok {
			return nil, err
		}
	}
	return webhook.Versioned(a, conv, version)
}

// matchResources applies match resources: rules (all when none are given) less
// excluded rules, and the selectors; version is the version of the request's resource the rules matched.
func matchResources(ctx context.Context, reader admission.Reader, conv admission.Converter, m *admissionregistrationv1.MatchResources, a *admission.Attributes) (version string, ok bool, err error) {
	if m == nil {
		return "", false, nil
	}
	if _, excluded := matchNamed(m.ExcludeResourceRules, m.MatchPolicy, a, conv); excluded {
		return "", false, nil
	}
	// No resourceRules match every resource, as upstream's matcher has it: a binding
	// that only narrows by namespace or object selector (a policy must name rules).
	if len(m.ResourceRules) == 0 {
		version = a.Resource.Version
	} else if version, ok = matchNamed(m.ResourceRules, m.MatchPolicy, a, conv); !ok {
		return "", false, nil
	}
	if ok, err := webhook.MatchNamespace(ctx, reader, m.NamespaceSelector, a); err != nil || !ok {
		return "", false, err
	}
	ok, err = webhook.MatchObject(m.ObjectSelector, a)
	return version, ok, err
}

func matchNamed(rules []admissionregistrationv1.NamedRuleWithOperations, policy *admissionregistrationv1.MatchPolicyType, a *admission.Attributes, conv admission.Converter) (string, bool) {
	var named []admissionregistrationv1.RuleWithOperations
	for _, r := range rules {
		if len(r.ResourceNames) > 0 && !contains(r.ResourceNames, a.Name) {
			continue
		}
		named = append(named, r.RuleWithOperations)
	}
	return webhook.MatchVersion(named, policy, a, conv)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// baseVars are object, oldObject, request, namespaceObject and authorizer.
func baseVars(ctx context.Context, reader admission.Reader, az authz.Authorizer, a *admission.Attributes) (map[string]any, error) {
	obj, err := cel.ToValue(a.Object)
	if err != nil {
		return nil, err
	}
	old, err := cel.ToValue(a.OldObject)
	if err != nil {
		return nil, err
	}
	rk, rr := a.OriginalKind(), a.OriginalResource()
	req := map[string]any{
		"kind":               map[string]any{"group": a.Kind.Group, "version": a.Kind.Version, "kind": a.Kind.Kind},
		"resource":           map[string]any{"group": a.Resource.Group, "version": a.Resource.Version, "resource": a.Resource.Resource},
		"requestKind":        map[string]any{"group": rk.Group, "version": rk.Version, "kind": rk.Kind},
		"requestResource":    map[string]any{"group": rr.Group, "version": rr.Version, "resource": rr.Resource},
		"requestSubResource": a.Subresource,
		"subResource":        a.Subresource, "name": a.Name, "namespace": a.Namespace, "operation": string(a.Operation),
		"userInfo": map[string]any{"username": a.User.Name, "uid": a.User.UID, "groups": toAny(a.User.Groups)},
		"dryRun":   a.DryRun,
	}
	vars := map[string]any{"object": obj, "oldObject": old, "request": req, "authorizer": cel.NewAuthorizer(ctx, az, a.User)}
	if a.Namespace != "" {
		if ns, err := reader.Get(ctx, corev1.SchemeGroupVersion.WithResource("namespaces"), "", a.Namespace); err == nil {
			if vars["namespaceObject"], err = cel.ToValue(ns); err != nil {
				return nil, err
			}
		}
	}
	return vars, nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// readParams are the parameter objects a binding's paramRef names for this request;
// nil without a paramKind. ref must be set when pk is.
func readParams(ctx context.Context, reader admission.Reader, pk *admissionregistrationv1.ParamKind, ref *admissionregistrationv1.ParamRef, a *admission.Attributes) ([]any, error) {
	if pk == nil {
		return nil, nil
	}
	gv, err := schema.ParseGroupVersion(pk.APIVersion)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gv.WithKind(pk.Kind))
	ns := ref.Namespace
	if ns == "" {
		ns = a.Namespace
	}
	var objs []runtime.Object
	if ref.Name != "" {
		obj, err := reader.Get(ctx, gvr, ns, ref.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil {
			objs = append(objs, obj)
		}
	} else {
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		all, err := reader.List(ctx, gvr, ns)
		if err != nil {
			return nil, err
		}
		for _, o := range all {
			if acc, err := meta.Accessor(o); err == nil && sel.Matches(labels.Set(acc.GetLabels())) {
				objs = append(objs, o)
			}
		}
	}
	if len(objs) == 0 {
		return nil, errParamsMissing
	}
	out := make([]any, 0, len(objs))
	for _, o := range objs {
		v, err := cel.ToValue(o)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
