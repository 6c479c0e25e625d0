package webhook

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/apiserver/admission"
)

// exempt: webhooks and policies are never called for the objects that configure
// them, so a broken webhook can always be removed.
func exempt(a *admission.Attributes) bool {
	if a.Resource.Group != admissionregistrationv1.GroupName {
		return false
	}
	switch a.Resource.Resource {
	case "validatingwebhookconfigurations", "mutatingwebhookconfigurations",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings",
		"mutatingadmissionpolicies", "mutatingadmissionpolicybindings":
		return true
	}
	return false
}

// MatchRules reports whether any rule covers the request as it was made, in its own
// version.
func MatchRules(rules []admissionregistrationv1.RuleWithOperations, a *admission.Attributes) bool {
	for _, r := range rules {
		if matchRule(r, a, a.Resource.Version) {
			return true
		}
	}
	return false
}

// MatchVersion reports whether any rule covers the request, and in which version of
// its resource: the request's own if a rule names it, else (matchPolicy Equivalent,
// the default) the first other served version, preferred first, that a rule names.
// The caller converts the request to that version (Attributes.InVersion).
func MatchVersion(rules []admissionregistrationv1.RuleWithOperations, policy *admissionregistrationv1.MatchPolicyType, a *admission.Attributes, c admission.Converter) (string, bool) {
	if MatchRules(rules, a) {
		return a.Resource.Version, true
	}
	if c == nil || (policy != nil && *policy == admissionregistrationv1.Exact) || !convertible(a) {
		return "", false
	}
	for _, v := range c.Versions(a.Resource.GroupResource()) {
		if v == a.Resource.Version {
			continue
		}
		for _, r := range rules {
			if matchRule(r, a, v) {
				return v, true
			}
		}
	}
	return "", false
}

// convertible says whether the request's objects are of its resource's own kind, so
// that another version of the resource is another version of them: the resource
// itself and its status, not scale or a CONNECT's options.
func convertible(a *admission.Attributes) bool {
	return a.Operation != admission.Connect && (a.Subresource == "" || a.Subresource == "status")
}

// Versioned is the request in the version MatchVersion chose.
func Versioned(a *admission.Attributes, c admission.Converter, version string) (*admission.Attributes, error) {
	if version == a.Resource.Version || c == nil {
		return a, nil
	}
	return a.InVersion(c, version)
}

func matchRule(r admissionregistrationv1.RuleWithOperations, a *admission.Attributes, version string) bool {
	opOK := false
	for _, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll || string(op) == string(a.Operation) {
			opOK = true
			break
		}
	}
	if !opOK || !matchList(r.APIGroups, a.Resource.Group) || !matchList(r.APIVersions, version) {
		return false
	}
	if !matchResource(r.Resources, a.Resource.Resource, a.Subresource) {
		return false
	}
	scope := admissionregistrationv1.AllScopes
	if r.Scope != nil {
		scope = *r.Scope
	}
	namespaced := a.Namespace != ""
	switch scope {
	case admissionregistrationv1.ClusterScope:
		return !namespaced
	case admissionregistrationv1.NamespacedScope:
		return namespaced
	}
	return true
}

func matchList(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// matchResource applies "*", "*/*", "res/*", "*/sub" and "res/sub".
func matchResource(list []string, res, sub string) bool {
	for _, r := range list {
		name, subName, hasSub := strings.Cut(r, "/")
		if name != "*" && name != res {
			continue
		}
		if !hasSub {
			if sub == "" {
				return true
			}
			continue
		}
		if subName == "*" || subName == sub {
			return true
		}
	}
	return false
}

// namespaceLabels are the labels a namespaceSelector is matched against: the
// namespace's for a namespaced object, the object's own for a namespace; ok is false
// for other cluster-scoped objects, which every namespaceSelector matches.
func namespaceLabels(ctx context.Context, r admission.Reader, a *admission.Attributes) (map[string]string, bool, error) {
	if a.Resource.Group == "" && a.Resource.Resource == "namespaces" {
		obj := a.Object
		if obj == nil {
			obj = a.OldObject
		}
		if acc, err := meta.Accessor(obj); err == nil {
			return acc.GetLabels(), true, nil
		}
		return nil, true, nil
	}
	if a.Namespace == "" {
		return nil, false, nil
	}
	obj, err := r.Get(ctx, corev1.SchemeGroupVersion.WithResource("namespaces"), "", a.Namespace)
	if err != nil {
		return nil, true, err
	}
	return obj.(*corev1.Namespace).Labels, true, nil
}

// MatchNamespace applies a namespaceSelector.
func MatchNamespace(ctx context.Context, r admission.Reader, sel *metav1.LabelSelector, a *admission.Attributes) (bool, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, fmt.Errorf("invalid namespaceSelector: %v", err)
	}
	l, applies, err := namespaceLabels(ctx, r, a)
	if err != nil || !applies {
		return !applies, err
	}
	return s.Matches(labels.Set(l)), nil
}

// MatchObject applies an objectSelector to the object or the old object.
func MatchObject(sel *metav1.LabelSelector, a *admission.Attributes) (bool, error) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return true, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, fmt.Errorf("invalid objectSelector: %v", err)
	}
	for _, o := range []runtime.Object{a.Object, a.OldObject} {
		if o == nil {
			continue
		}
		if acc, err := meta.Accessor(o); err == nil && s.Matches(labels.Set(acc.GetLabels())) {
			return true, nil
		}
	}
	return false, nil
}
