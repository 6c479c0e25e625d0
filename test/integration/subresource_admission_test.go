package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestSubresourceCreatesAdmitted checks that pods/binding and pods/eviction reach
// admission as upstream sends them: a CREATE of the Binding or Eviction (what a
// webhook or policy on those subresources matches), while the writes they then make
// to the pod are not admitted again, so a policy refusing to delete a pod does not
// stop its eviction.
func TestSubresourceCreatesAdmitted(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	mustNamespace(t, c, "subadm")
	pods := c.CoreV1().Pods("subadm")

	policy := func(name string, op admissionregistrationv1.OperationType, resource, expression string, objectLabels map[string]string) {
		t.Helper()
		rules := []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{op},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}}
		match := &admissionregistrationv1.MatchResources{ResourceRules: rules}
		if objectLabels != nil {
			match.ObjectSelector = &metav1.LabelSelector{MatchLabels: objectLabels}
		}
		if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: match,
				Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: name + " refuses"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policy("binding-target", "CREATE", "pods/binding", "object.kind == 'Binding' && object.target.name != 'forbidden'", nil)
	policy("protect-eviction", "CREATE", "pods/eviction", "object.kind == 'Eviction' && object.metadata.name != 'protected'", nil)
	policy("keep-pods", "DELETE", "pods", "false", map[string]string{"keep": "yes"})
	policy("no-pod-update", "UPDATE", "pods/binding", "false", nil)

	for _, name := range []string{"tobind", "protected", "kept"} {
		pod := newPod(name)
		if name == "kept" {
			pod.Labels = map[string]string{"keep": "yes"}
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(node string) error {
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "tobind"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	// The policies take effect once the server's watch has them.
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err = pods.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if err = pods.Delete(ctx, "kept", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "keep-pods refuses") {
		t.Fatalf("deleting a kept pod: %v, want keep-pods to refuse", err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(errString(err), "binding-target refuses"); time.Sleep(100 * time.Millisecond) {
		err = bind("forbidden")
		if err == nil {
			t.Fatal("bound to the forbidden node: the Binding was not admitted as a CREATE of pods/binding")
		}
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "binding-target refuses") {
		t.Fatalf("binding to the forbidden node: %v, want binding-target to refuse", err)
	}
	// Allowed, and not refused by the policy on pod UPDATEs through pods/binding: the
	// pod's write is not admitted again.
	if err := bind("n1"); err != nil {
		t.Fatalf("binding to n1: %v", err)
	}
	if got, err := pods.Get(ctx, "tobind", metav1.GetOptions{}); err != nil || got.Spec.NodeName != "n1" {
		t.Fatalf("bound pod: %v, node %q", err, got.Spec.NodeName)
	}

	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "subadm"}})
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(errString(err), "protect-eviction refuses"); time.Sleep(100 * time.Millisecond) {
		err = evict("protected")
		if err == nil {
			t.Fatal("evicted the protected pod: the Eviction was not admitted as a CREATE of pods/eviction")
		}
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "protect-eviction refuses") {
		t.Fatalf("evicting the protected pod: %v, want protect-eviction to refuse", err)
	}
	if _, err := pods.Get(ctx, "protected", metav1.GetOptions{}); err != nil {
		t.Fatalf("the protected pod after a refused eviction: %v", err)
	}
	// The kept pod may not be deleted, but may be evicted.
	if err := evict("kept"); err != nil {
		t.Fatalf("evicting the kept pod: %v", err)
	}
	if _, err := pods.Get(ctx, "kept", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the kept pod after its eviction: %v, want it gone", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
