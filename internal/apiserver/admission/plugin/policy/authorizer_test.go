package policy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission/admissiontest"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// onlyAlice lets alice create secrets in "team" and the service account team/bot get
// /healthz; nothing else.
type onlyAlice struct{}

func (onlyAlice) Authorize(_ context.Context, a authz.Attributes) (bool, string) {
	switch {
	case a.User.Name == "alice" && a.ResourceRequest && a.Verb == "create" && a.Resource == "secrets" && a.Namespace == "team" && a.Group == "":
		return true, "alice owns team"
	case a.User.Name == "system:serviceaccount:team:bot" && !a.ResourceRequest && a.Path == "/healthz" && a.Verb == "get":
		return true, ""
	}
	return false, "not alice"
}

// TestPolicyAuthorizer: the authorizer variable answers a ValidatingAdmissionPolicy's
// and a MutatingAdmissionPolicy's checks for the request's user and for a named
// service account.
func TestPolicyAuthorizer(t *testing.T) {
	c, m := compilers(t)
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "owners"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: configMapRules(),
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('create').allowed()",
				MessageExpression: "'only secret owners: ' + authorizer.group('').resource('secrets').namespace(object.metadata.namespace).check('create').reason()",
			}, {
				Expression: "authorizer.serviceAccount('team', 'bot').path('/healthz').check('get').allowed() && !authorizer.serviceAccount('team', 'other').path('/healthz').check('get').allowed()",
			}}}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "owners"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "owners", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	mp := mutatingPolicy("mark", applyConfig(`Object{metadata: Object.metadata{labels: {"owner": string(authorizer.group('').resource('secrets').namespace('team').name('x').subresource('').check('create').allowed())}}}`))
	store := admissiontest.New(vap, binding, mp, mutatingBinding("mark", "mark"), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
	validating := New(store, c, nil, onlyAlice{})
	mutating := NewMutating(store, c, m, deducedMerger{}, nil, onlyAlice{})

	for _, tc := range []struct {
		user, wantErr, wantLabel string
	}{
		{"alice", "", "true"},
		{"bob", "ValidatingAdmissionPolicy 'owners' with binding 'owners' denied request: only secret owners: not alice", "false"},
	} {
		a := configMapCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "team"}})
		a.User = registry.User{Name: tc.user}
		if err := mutating.Admit(context.Background(), a); err != nil {
			t.Fatalf("%s: mutating: %v", tc.user, err)
		}
		if got := a.Object.(*corev1.ConfigMap).Labels["owner"]; got != tc.wantLabel {
			t.Errorf("%s: label owner=%q, want %q", tc.user, got, tc.wantLabel)
		}
		err := validating.Validate(context.Background(), a)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.user, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want %q", tc.user, err, tc.wantErr)
		}
	}
}
