package webhook

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
)

func TestMatchRules(t *testing.T) {
	rule := func(res string, scope admissionregistrationv1.ScopeType, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"", "apps"}, APIVersions: []string{"v1"}, Resources: []string{res}, Scope: &scope}}}
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	exact := admissionregistrationv1.Exact
	tests := []struct {
		name  string
		rules []admissionregistrationv1.RuleWithOperations
		a     admission.Attributes
		exact bool
		want  bool
	}{
		{"resource", rule("pods", "*", "CREATE"), admission.Attributes{Operation: admission.Create, Resource: pods, Namespace: "n"}, false, true},
		{"operation", rule("pods", "*", "UPDATE"), admission.Attributes{Operation: admission.Create, Resource: pods, Namespace: "n"}, false, false},
		{"* is not subresources", rule("*", "*", "*"), admission.Attributes{Operation: admission.Update, Resource: pods, Subresource: "status", Namespace: "n"}, false, false},
		{"*/* is", rule("*/*", "*", "*"), admission.Attributes{Operation: admission.Update, Resource: pods, Subresource: "status", Namespace: "n"}, false, true},
		{"pods/*", rule("pods/*", "*", "*"), admission.Attributes{Operation: admission.Connect, Resource: pods, Subresource: "exec", Namespace: "n"}, false, true},
		{"*/status", rule("*/status", "*", "*"), admission.Attributes{Operation: admission.Update, Resource: pods, Subresource: "status", Namespace: "n"}, false, true},
		{"namespaced scope", rule("pods", "Namespaced", "*"), admission.Attributes{Operation: admission.Create, Resource: pods, Namespace: "n"}, false, true},
		{"cluster scope", rule("pods", "Cluster", "*"), admission.Attributes{Operation: admission.Create, Resource: pods, Namespace: "n"}, false, false},
		{"equivalent version", rule("pods", "*", "*"), admission.Attributes{Operation: admission.Create, Resource: pods.GroupResource().WithVersion("v2"), Namespace: "n"}, false, true},
		{"request in a third version", rule("pods", "*", "*"), admission.Attributes{Operation: admission.Create, Resource: pods.GroupResource().WithVersion("v3"), Namespace: "n"}, false, true},
		{"status of an equivalent version", rule("pods/status", "*", "*"), admission.Attributes{Operation: admission.Update, Resource: pods.GroupResource().WithVersion("v2"), Subresource: "status", Namespace: "n"}, false, true},
		{"no conversion of a connect's options", rule("pods/exec", "*", "*"), admission.Attributes{Operation: admission.Connect, Resource: pods.GroupResource().WithVersion("v2"), Subresource: "exec", Namespace: "n"}, false, false},
		{"exact version", rule("pods", "*", "*"), admission.Attributes{Operation: admission.Create, Resource: pods.GroupResource().WithVersion("v2"), Namespace: "n"}, true, false},
	}
	for _, tt := range tests {
		var policy *admissionregistrationv1.MatchPolicyType
		if tt.exact {
			policy = &exact
		}
		if _, got := MatchVersion(tt.rules, policy, &tt.a, versions{"v1", "v2"}); got != tt.want {
			t.Errorf("%s: got %v", tt.name, got)
		}
	}
	// The version chosen is the one the rule names.
	v, ok := MatchVersion(rule("pods", "*", "*"), nil, &admission.Attributes{Operation: admission.Create, Resource: pods.GroupResource().WithVersion("v2"), Namespace: "n"}, versions{"v2", "v1"})
	if !ok || v != "v1" {
		t.Errorf("equivalent match chose %q, %v; want v1", v, ok)
	}
	cfg := admission.Attributes{Resource: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")}
	if !exempt(&cfg) {
		t.Error("webhook configurations must be exempt")
	}
}

// versions is a Converter that serves every resource in the listed versions; matching
// never converts.
type versions []string

func (v versions) Versions(schema.GroupResource) []string { return v }

func (versions) Convert(obj runtime.Object, _ schema.GroupVersionResource, to string) (runtime.Object, schema.GroupVersionKind, error) {
	return obj, schema.GroupVersionKind{Version: to}, nil
}
