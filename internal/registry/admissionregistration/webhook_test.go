package admissionregistration

import (
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func validValidating() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "policy"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "pods.policy.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "policy", Name: "webhook", Path: ptr.To("/validate")},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

func TestWebhookDefaults(t *testing.T) {
	r := findResource(t, "mutatingwebhookconfigurations")
	c := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "s", Namespace: "n"}},
		Rules:        []admissionregistrationv1.RuleWithOperations{{}},
	}}}
	r.Strategy.Default(c)
	w := c.Webhooks[0]
	got := []interface{}{*w.FailurePolicy, *w.MatchPolicy, *w.NamespaceSelector, *w.ObjectSelector, *w.TimeoutSeconds,
		*w.ReinvocationPolicy, *w.Rules[0].Scope, *w.ClientConfig.Service.Port}
	want := []interface{}{admissionregistrationv1.Fail, admissionregistrationv1.Equivalent, metav1.LabelSelector{}, metav1.LabelSelector{},
		int32(10), admissionregistrationv1.NeverReinvocationPolicy, admissionregistrationv1.AllScopes, int32(443)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults = %v, want %v", got, want)
	}
	if w.SideEffects != nil {
		t.Errorf("sideEffects must not be defaulted in v1")
	}
}

func TestWebhookValidate(t *testing.T) {
	r := findResource(t, "validatingwebhookconfigurations")
	if r.Namespaced || !reflect.DeepEqual(r.Categories, []string{"api-extensions"}) {
		t.Errorf("identity = %+v", r)
	}
	hook := func(c *admissionregistrationv1.ValidatingWebhookConfiguration) *admissionregistrationv1.ValidatingWebhook {
		return &c.Webhooks[0]
	}
	tests := []struct {
		name   string
		mutate func(*admissionregistrationv1.ValidatingWebhookConfiguration)
		want   []fieldErr
	}{
		{"valid", func(*admissionregistrationv1.ValidatingWebhookConfiguration) {}, nil},
		{"https url", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://hooks.example.com:8443/validate")}
		}, nil},
		{"name not fully qualified", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { hook(c).Name = "pods" },
			[]fieldErr{{field.ErrorTypeInvalid, "webhooks[0].name"}}},
		{"duplicate names", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			c.Webhooks = append(c.Webhooks, *hook(c).DeepCopy())
		}, []fieldErr{{field.ErrorTypeDuplicate, "webhooks[1].name"}}},
		{"no sideEffects", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { hook(c).SideEffects = nil },
			[]fieldErr{{field.ErrorTypeRequired, "webhooks[0].sideEffects"}}},
		{"sideEffects Some", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, []fieldErr{{field.ErrorTypeNotSupported, "webhooks[0].sideEffects"}}},
		{"no review versions", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) { hook(c).AdmissionReviewVersions = nil },
			[]fieldErr{{field.ErrorTypeRequired, "webhooks[0].admissionReviewVersions"}}},
		{"unknown review version only", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).AdmissionReviewVersions = []string{"v2"}
		}, []fieldErr{{field.ErrorTypeInvalid, "webhooks[0].admissionReviewVersions"}}},
		{"url and service", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).ClientConfig.URL = ptr.To("https://example.com")
		}, []fieldErr{{field.ErrorTypeRequired, "webhooks[0].clientConfig"}}},
		{"neither url nor service", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).ClientConfig = admissionregistrationv1.WebhookClientConfig{}
		}, []fieldErr{{field.ErrorTypeRequired, "webhooks[0].clientConfig"}}},
		{"http url", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("http://example.com/?a=b")}
		}, []fieldErr{{field.ErrorTypeInvalid, "webhooks[0].clientConfig.url"}, {field.ErrorTypeInvalid, "webhooks[0].clientConfig.url"}}},
		{"service without namespace and bad path", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			svc := hook(c).ClientConfig.Service
			svc.Namespace = ""
			svc.Path = ptr.To("/a//b")
		}, []fieldErr{{field.ErrorTypeRequired, "webhooks[0].clientConfig.service.namespace"}, {field.ErrorTypeInvalid, "webhooks[0].clientConfig.service.path"}}},
		{"bad port", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).ClientConfig.Service.Port = ptr.To[int32](0)
		},
			[]fieldErr{{field.ErrorTypeInvalid, "webhooks[0].clientConfig.service.port"}}},
		{"timeout too long", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).TimeoutSeconds = ptr.To[int32](31)
		},
			[]fieldErr{{field.ErrorTypeInvalid, "webhooks[0].timeoutSeconds"}}},
		{"bad failure policy", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).FailurePolicy = ptr.To(admissionregistrationv1.FailurePolicyType("Retry"))
		}, []fieldErr{{field.ErrorTypeNotSupported, "webhooks[0].failurePolicy"}}},
		{"wildcard operation with others", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).Rules[0].Operations = []admissionregistrationv1.OperationType{"*", "CREATE"}
		}, []fieldErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].operations"}}},
		{"unknown operation", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).Rules[0].Operations = []admissionregistrationv1.OperationType{"PATCH"}
		}, []fieldErr{{field.ErrorTypeNotSupported, "webhooks[0].rules[0].operations[0]"}}},
		{"wildcard group with others", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).Rules[0].APIGroups = []string{"apps", "*"}
		}, []fieldErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].apiGroups"}}},
		{"overlapping resources", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).Rules[0].Resources = []string{"pods/*", "pods/status"}
		}, []fieldErr{{field.ErrorTypeInvalid, "webhooks[0].rules[0].resources[1]"}}},
		{"bad scope", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).Rules[0].Scope = ptr.To(admissionregistrationv1.ScopeType("Galaxy"))
		}, []fieldErr{{field.ErrorTypeNotSupported, "webhooks[0].rules[0].scope"}}},
		{"match condition without expression", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "exclude-leases"}}
		}, []fieldErr{{field.ErrorTypeRequired, "webhooks[0].matchConditions[0].expression"}}},
		{"match condition that does not parse", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "invalid-expression-1", Expression: "... [] bad expression"}}
		}, []fieldErr{{field.ErrorTypeInvalid, "webhooks[0].matchConditions[0].expression"}}},
		{"match condition that parses", func(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
			hook(c).MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "skip-me", Expression: "object.metadata.name != 'skip-me'"}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validValidating()
			tt.mutate(c)
			r.Strategy.Default(c)
			assertErrs(t, r.Strategy.Validate(ctx, c), tt.want)
		})
	}
}

func TestMutatingReinvocationPolicy(t *testing.T) {
	r := findResource(t, "mutatingwebhookconfigurations")
	v := validValidating().Webhooks[0]
	c := &admissionregistrationv1.MutatingWebhookConfiguration{Webhooks: []admissionregistrationv1.MutatingWebhook{{
		Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, SideEffects: v.SideEffects,
		AdmissionReviewVersions: v.AdmissionReviewVersions,
		ReinvocationPolicy:      ptr.To(admissionregistrationv1.ReinvocationPolicyType("Always")),
	}}}
	r.Strategy.Default(c)
	assertErrs(t, r.Strategy.Validate(ctx, c), []fieldErr{{field.ErrorTypeNotSupported, "webhooks[0].reinvocationPolicy"}})
}

// An update keeps accepting what the stored object already had, as upstream does.
func TestWebhookUpdateRelaxesPreexistingProblems(t *testing.T) {
	r := findResource(t, "validatingwebhookconfigurations")
	old := validValidating()
	old.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassUnknown)
	old.Webhooks = append(old.Webhooks, *old.Webhooks[0].DeepCopy())
	r.Strategy.Default(old)
	updated := old.DeepCopy()
	updated.Webhooks[0].TimeoutSeconds = ptr.To[int32](5)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), nil)
	assertErrs(t, r.Strategy.Validate(ctx, updated), []fieldErr{
		{field.ErrorTypeNotSupported, "webhooks[0].sideEffects"},
		{field.ErrorTypeNotSupported, "webhooks[1].sideEffects"},
		{field.ErrorTypeDuplicate, "webhooks[1].name"},
	})
}

func TestWebhookPrint(t *testing.T) {
	for _, resource := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
		r := findResource(t, resource)
		assertColumns(t, r, "Name", "Webhooks", "Age")
		obj := r.New()
		m := obj.(metav1.Object)
		m.SetName("policy")
		m.SetCreationTimestamp(threeDaysAgo)
		switch c := obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			c.Webhooks = make([]admissionregistrationv1.ValidatingWebhook, 2)
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			c.Webhooks = make([]admissionregistrationv1.MutatingWebhook, 2)
		}
		if got, want := r.Printer.Row(obj), []interface{}{"policy", int64(2), "3d"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s row = %#v, want %#v", resource, got, want)
		}
	}
}

func TestWebhookSideEffectsMessage(t *testing.T) {
	r := findResource(t, "validatingwebhookconfigurations")
	c := validValidating()
	c.Webhooks[0].SideEffects = nil
	r.Strategy.Default(c)
	errs := r.Strategy.Validate(ctx, c)
	if len(errs) != 1 || errs[0].Detail != "must specify one of None, NoneOnDryRun" {
		t.Errorf("errors = %v", errs)
	}
}

// Unchanged match conditions are not re-validated on update, as upstream does, so
// that objects stored before a rule tightened stay updatable.
func TestWebhookUpdateKeepsUnchangedMatchConditions(t *testing.T) {
	r := findResource(t, "validatingwebhookconfigurations")
	old := validValidating()
	old.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "Bad Name!", Expression: "true"}}
	r.Strategy.Default(old)
	updated := old.DeepCopy()
	updated.Webhooks[0].TimeoutSeconds = ptr.To[int32](5)
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), nil)
	updated.Webhooks[0].MatchConditions[0].Expression = "false"
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), []fieldErr{{field.ErrorTypeInvalid, "webhooks[0].matchConditions[0].name"}})
}

// TestMatchConditionCompileErrorMessage: the spec that creates a webhook with a broken
// expression looks for upstream's "compilation failed" in the error.
func TestMatchConditionCompileErrorMessage(t *testing.T) {
	r := findResource(t, "mutatingwebhookconfigurations")
	v := validValidating().Webhooks[0]
	c := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "policy"}, Webhooks: []admissionregistrationv1.MutatingWebhook{{
		Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, SideEffects: v.SideEffects, AdmissionReviewVersions: v.AdmissionReviewVersions,
	}}}
	c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "invalid-expression-1", Expression: "... [] bad expression"}}
	r.Strategy.Default(c)
	errs := r.Strategy.Validate(ctx, c)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "compilation failed: ERROR: <input>:1:") {
		t.Fatalf("errors = %v, want one compilation failure", errs)
	}
}
