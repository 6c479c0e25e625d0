// Package admissionregistration describes the admissionregistration.k8s.io/v1 webhook
// configurations (validating and mutating), with their defaulting, validation and
// printing as upstream Kubernetes does them.
package admissionregistration

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
)

// Resources returns the admissionregistration.k8s.io/v1 resources: the webhook
// configurations, and ValidatingAdmissionPolicy with its bindings.
func Resources() []*registry.Resource {
	return append([]*registry.Resource{
		{
			GroupVersion: admissionregistrationv1.SchemeGroupVersion,
			Resource:     "validatingwebhookconfigurations",
			Kind:         "ValidatingWebhookConfiguration",
			SingularName: "validatingwebhookconfiguration",
			Categories:   []string{"api-extensions"},
			New:          func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
			Strategy:     configurationStrategy{},
			Printer:      webhooksPrinter,
		},
		{
			GroupVersion: admissionregistrationv1.SchemeGroupVersion,
			Resource:     "mutatingwebhookconfigurations",
			Kind:         "MutatingWebhookConfiguration",
			SingularName: "mutatingwebhookconfiguration",
			Categories:   []string{"api-extensions"},
			New:          func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
			NewList:      func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
			Strategy:     configurationStrategy{},
			Printer:      webhooksPrinter,
		},
	}, policyResources()...)
}

var webhooksPrinter = &registry.Printer{
	Columns: []metav1.TableColumnDefinition{
		registry.NameColumn,
		{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration"},
		registry.AgeColumn,
	},
	Row: func(obj runtime.Object) []interface{} {
		m := obj.(metav1.Object)
		return []interface{}{m.GetName(), int64(len(hooksOf(obj))), registry.Age(m.GetCreationTimestamp())}
	},
}

// hook is the view of one webhook that both configuration kinds share; its pointers
// address the webhook's own fields, so defaulting through it changes the object.
type hook struct {
	Name                    string
	ClientConfig            *admissionregistrationv1.WebhookClientConfig
	Rules                   []admissionregistrationv1.RuleWithOperations
	FailurePolicy           **admissionregistrationv1.FailurePolicyType
	MatchPolicy             **admissionregistrationv1.MatchPolicyType
	NamespaceSelector       **metav1.LabelSelector
	ObjectSelector          **metav1.LabelSelector
	SideEffects             *admissionregistrationv1.SideEffectClass
	TimeoutSeconds          **int32
	AdmissionReviewVersions []string
	MatchConditions         []admissionregistrationv1.MatchCondition
	// ReinvocationPolicy is nil for validating webhooks, which have none.
	ReinvocationPolicy **admissionregistrationv1.ReinvocationPolicyType
}

func hooksOf(obj runtime.Object) []hook {
	var hooks []hook
	switch c := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			hooks = append(hooks, hook{w.Name, &w.ClientConfig, w.Rules, &w.FailurePolicy, &w.MatchPolicy,
				&w.NamespaceSelector, &w.ObjectSelector, w.SideEffects, &w.TimeoutSeconds,
				w.AdmissionReviewVersions, w.MatchConditions, nil})
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			hooks = append(hooks, hook{w.Name, &w.ClientConfig, w.Rules, &w.FailurePolicy, &w.MatchPolicy,
				&w.NamespaceSelector, &w.ObjectSelector, w.SideEffects, &w.TimeoutSeconds,
				w.AdmissionReviewVersions, w.MatchConditions, &w.ReinvocationPolicy})
		}
	default:
		panic(fmt.Sprintf("admissionregistration: not a webhook configuration: %T", obj))
	}
	return hooks
}

type configurationStrategy struct{ registry.BaseStrategy }

func (configurationStrategy) Default(obj runtime.Object) {
	for _, h := range hooksOf(obj) {
		defaultHook(h)
	}
}

func (configurationStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateConfiguration(hooksOf(obj), strictOptions)
}

// ValidateUpdate applies the checks introduced after v1 only when the stored object
// already passed them, so that old configurations stay updatable.
func (configurationStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validateConfiguration(hooksOf(obj), updateOptions(hooksOf(obj), hooksOf(old)))
}
