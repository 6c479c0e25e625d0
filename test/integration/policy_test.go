package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

func TestValidatingAdmissionPolicy(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	mustNamespace(t, c, "vap")
	_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "replica-limit"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "object.spec.replicas <= int(params.data.maxReplicas)",
				MessageExpression: "'replicas must be no greater than ' + params.data.maxReplicas",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps("vap").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Data: map[string]string{"maxReplicas": "3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		name   string
		action admissionregistrationv1.ValidationAction
		label  string
	}{{"deny", admissionregistrationv1.Deny, "deny"}, {"warn", admissionregistrationv1.Warn, "warn"}} {
		_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "replica-limit",
				ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)},
				ValidationActions: []admissionregistrationv1.ValidationAction{b.action},
				MatchResources: &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mode": b.label}},
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{"*"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	deploy := func(name, mode string, replicas int32) *appsv1.Deployment {
		l := map[string]string{"app": name}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"mode": mode}},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: l},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
	}
	var denyErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, denyErr = c.AppsV1().Deployments("vap").Create(ctx, deploy("big", "deny", 5), metav1.CreateOptions{}); denyErr != nil {
			break
		}
		_ = c.AppsV1().Deployments("vap").Delete(ctx, "big", metav1.DeleteOptions{})
	}
	want := "ValidatingAdmissionPolicy 'replica-limit' with binding 'deny' denied request: replicas must be no greater than 3"
	if !apierrors.IsInvalid(denyErr) || !strings.Contains(denyErr.Error(), want) {
		t.Fatalf("deny: %v, want %q", denyErr, want)
	}
	if _, err := c.AppsV1().Deployments("vap").Create(ctx, deploy("small", "deny", 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
	var seen warnings
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = &seen
	if _, err := kubernetes.NewForConfigOrDie(wcfg).AppsV1().Deployments("vap").Create(ctx, deploy("warned", "warn", 5), metav1.CreateOptions{}); err != nil {
		t.Fatalf("warn binding: %v", err)
	}
	if len(seen) != 1 || seen[0] != "Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'warn': replicas must be no greater than 3" {
		t.Errorf("warnings %q", seen)
	}
}
