package webhook

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
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
		{"exact version", rule("pods", "*", "*"), admission.Attributes{Operation: admission.Create, Resource: pods.GroupResource().WithVersion("v2"), Namespace: "n"}, true, false},
	}
	for _, tt := range tests {
		var policy *admissionregistrationv1.MatchPolicyType
		if tt.exact {
			policy = &exact
		}
		if got := MatchRules(tt.rules, policy, &tt.a); got != tt.want {
			t.Errorf("%s: got %v", tt.name, got)
		}
	}
	cfg := admission.Attributes{Resource: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")}
	if !exempt(&cfg) {
		t.Error("webhook configurations must be exempt")
	}
}
