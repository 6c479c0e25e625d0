package policy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission/admissiontest"
)

// TestValidatingPolicyBindingWithoutResourceRules: a binding whose matchResources only
// selects namespaces (no resourceRules, as upstream's conformance spec writes it)
// applies the policy to everything the policy matches in those namespaces.
func TestValidatingPolicyBindingWithoutResourceRules(t *testing.T) {
	c, _ := compilers(t)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"policy-test": "true"}}
	constraints := configMapRules()
	constraints.NamespaceSelector = selector
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: constraints,
			Validations: []admissionregistrationv1.Validation{{Expression: "object.data.k == 'ok'", MessageExpression: "'wants ok, got ' + object.data.k"}}}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: selector},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	p := New(admissiontest.New(policy, binding,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mine", Labels: map[string]string{"policy-test": "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}), c, nil, nil)
	for _, tc := range []struct{ namespace, value, wantErr string }{
		{"mine", "bad", "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: wants ok, got bad"},
		{"mine", "ok", ""},
		{"other", "bad", ""},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: tc.namespace}, Data: map[string]string{"k": tc.value}}
		err := p.Validate(context.Background(), configMapCreate(cm))
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s, k=%s: Validate = %v, want %q", tc.namespace, tc.value, err, tc.wantErr)
		}
	}
}
