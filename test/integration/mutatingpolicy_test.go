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
	arv1ac "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestMutatingAdmissionPolicy: the API is served in admissionregistration.k8s.io/v1
// (discovery, CRUD, server-side apply), and bindings mutate deployments with an apply
// configuration merged by the deployment's schema (containers keyed by name) and
// config maps with a JSON patch built from a param.
func TestMutatingAdmissionPolicy(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	mustNamespace(t, c, "map")

	resources, err := c.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, r := range resources.APIResources {
		found[r.Name] = true
	}
	for _, r := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
		if !found[r] {
			t.Errorf("discovery of admissionregistration.k8s.io/v1 lacks %s", r)
		}
	}

	// Server-side apply creates the policy; an invalid one is refused.
	rules := arv1ac.MatchResources().WithResourceRules(arv1ac.NamedRuleWithOperations().
		WithOperations(admissionregistrationv1.Create, admissionregistrationv1.Update).
		WithAPIGroups("apps").WithAPIVersions("v1").WithResources("deployments"))
	_, err = c.AdmissionregistrationV1().MutatingAdmissionPolicies().Apply(ctx, arv1ac.MutatingAdmissionPolicy("sidecar-env").
		WithSpec(arv1ac.MutatingAdmissionPolicySpec().WithMatchConstraints(rules).
			WithReinvocationPolicy(admissionregistrationv1.NeverReinvocationPolicy).
			WithMutations(arv1ac.Mutation().WithPatchType(admissionregistrationv1.PatchTypeApplyConfiguration).
				WithApplyConfiguration(arv1ac.ApplyConfiguration().WithExpression(`Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
					containers: [Object.spec.template.spec.containers{name: "main", env: [Object.spec.template.spec.containers.env{name: "MUTATED", value: "yes"}]}]}}}}`)))),
		metav1.ApplyOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, "sidecar-env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Spec.FailurePolicy == nil || *pol.Spec.FailurePolicy != admissionregistrationv1.Fail || len(pol.ManagedFields) == 0 {
		t.Errorf("applied policy: failurePolicy %v, managedFields %d; want defaulted Fail and the apply's manager", pol.Spec.FailurePolicy, len(pol.ManagedFields))
	}
	_, err = c.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "invalid"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicySpec{ReinvocationPolicy: "Sometimes"},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.mutations: Required value") || !strings.Contains(err.Error(), `spec.reinvocationPolicy: Unsupported value: "Sometimes"`) {
		t.Errorf("invalid policy: %v", err)
	}
	if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecar-env"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "sidecar-env"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A JSON patch from a param, on config maps labelled stamp=yes.
	if _, err := c.CoreV1().ConfigMaps("map").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stamp-params"}, Data: map[string]string{"stamp": "from-param"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "stamp"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			MatchConditions:    []admissionregistrationv1.MatchCondition{{Name: "labelled", Expression: `has(object.metadata.labels) && object.metadata.labels["stamp"] == "yes"`}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, JSONPatch: &admissionregistrationv1.JSONPatch{
				Expression: `[JSONPatch{op: "add", path: "/metadata/annotations", value: {}}, JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("example.com/stamp"), value: params.data.stamp}]`}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "stamp"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "stamp",
			ParamRef: &admissionregistrationv1.ParamRef{Name: "stamp-params", ParameterNotFoundAction: ptr(admissionregistrationv1.DenyAction)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	replicas := int32(1)
	l := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "main", Image: "main-image", Env: []corev1.EnvVar{{Name: "KEEP", Value: "1"}}},
				{Name: "other", Image: "other-image"},
			}}}}}
	// Policies take effect once the watch cache has them; until then retry the create.
	var created *appsv1.Deployment
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if created, err = c.AppsV1().Deployments("map").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(created.Spec.Template.Spec.Containers[0].Env) > 1 {
			break
		}
		_ = c.AppsV1().Deployments("map").Delete(ctx, "web", metav1.DeleteOptions{})
	}
	cs := created.Spec.Template.Spec.Containers
	if len(cs) != 2 || cs[0].Name != "main" || cs[0].Image != "main-image" || cs[1].Name != "other" {
		t.Fatalf("containers after the apply configuration: %+v; want main (image kept) and other", cs)
	}
	env := map[string]string{}
	for _, e := range cs[0].Env {
		env[e.Name] = e.Value
	}
	if env["KEEP"] != "1" || env["MUTATED"] != "yes" {
		t.Errorf("main's env = %v, want KEEP=1 kept and MUTATED=yes merged in by name", env)
	}

	var cm *corev1.ConfigMap
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cm, err = c.CoreV1().ConfigMaps("map").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stamped", Labels: map[string]string{"stamp": "yes"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if cm.Annotations["example.com/stamp"] != "" {
			break
		}
		_ = c.CoreV1().ConfigMaps("map").Delete(ctx, "stamped", metav1.DeleteOptions{})
	}
	if got := cm.Annotations["example.com/stamp"]; got != "from-param" {
		t.Errorf("stamped config map annotations = %v, want example.com/stamp=from-param", cm.Annotations)
	}
	plain, err := c.CoreV1().ConfigMaps("map").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Annotations) != 0 {
		t.Errorf("a config map the matchCondition excludes was mutated: %v", plain.Annotations)
	}
}
