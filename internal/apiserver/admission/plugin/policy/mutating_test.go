package policy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/utils/ptr"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
	"mizzen/internal/apiserver/admission/cel"
	"mizzen/internal/apiserver/fieldmanager"
)

// deducedMerger merges apply configurations with a schema deduced from the objects
// (maps granular, lists atomic), enough for labels and data.
type deducedMerger struct{}

func (deducedMerger) MergeApplyConfiguration(obj runtime.Object, config map[string]interface{}) (runtime.Object, error) {
	return fieldmanager.MergeTyped(managedfields.NewDeducedTypeConverter(), obj, config)
}

func newMutating(t *testing.T, objs ...runtime.Object) *Mutating {
	c, m := compilers(t)
	return NewMutating(admissiontest.New(objs...), c, m, deducedMerger{}, nil, nil)
}

func compilers(t *testing.T) (*cel.Compiler, *cel.MutationCompiler) {
	t.Helper()
	c, err := cel.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	m, err := cel.NewMutationCompiler()
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

func configMapRules() *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}}}}
}

func mutatingPolicy(name string, mutations ...admissionregistrationv1.Mutation) *admissionregistrationv1.MutatingAdmissionPolicy {
	return &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: configMapRules(), Mutations: mutations,
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy}}
}

func mutatingBinding(name, policy string) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policy}}
}

func applyConfig(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr}}
}

func jsonPatch(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr}}
}

func configMapCreate(cm *corev1.ConfigMap) *admission.Attributes {
	return &admission.Attributes{Operation: admission.Create, Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Namespace: cm.Namespace, Name: cm.Name, Object: cm,
		User: admission.Attributes{}.User}
}

func TestMutatingAdmissionPolicyMutations(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "prod"}}}
	params := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "params", Namespace: "default"}, Data: map[string]string{"owner": "team-a"}}
	withParams := mutatingPolicy("with-params", applyConfig(`Object{metadata: Object.metadata{labels: {"owner": params.data.owner}}}`))
	withParams.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	paramBinding := mutatingBinding("b-params", "with-params")
	paramBinding.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "params", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}
	conditional := mutatingPolicy("conditional", jsonPatch(`[JSONPatch{op: "add", path: "/data/skipped", value: "yes"}]`))
	conditional.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "only-x", Expression: `object.metadata.name == "x"`}}

	p := newMutating(t, ns, params,
		mutatingPolicy("apply", applyConfig(`Object{metadata: Object.metadata{labels: {"env": namespaceObject.metadata.labels.env}}}`)),
		mutatingPolicy("patch", jsonPatch(`[JSONPatch{op: "add", path: "/data/" + jsonpatch.escapeKey("a/b"), value: object.metadata.name}]`)),
		withParams, conditional,
		mutatingBinding("b-apply", "apply"), mutatingBinding("b-patch", "patch"), paramBinding, mutatingBinding("b-cond", "conditional"),
		mutatingBinding("b-missing-policy", "nope"))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default", Labels: map[string]string{"keep": "me"}}, Data: map[string]string{"k": "v"}}
	a := configMapCreate(cm)
	if err := p.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := a.Object.(*corev1.ConfigMap)
	want := map[string]string{"keep": "me", "env": "prod", "owner": "team-a"}
	for k, v := range want {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
		}
	}
	if got.Data["a/b"] != "cm" || got.Data["k"] != "v" {
		t.Errorf("data = %v, want a/b=cm added beside k=v", got.Data)
	}
	if _, ok := got.Data["skipped"]; ok {
		t.Errorf("a policy whose matchCondition is false mutated the object: %v", got.Data)
	}
}

func TestMutatingAdmissionPolicyFailures(t *testing.T) {
	bad := mutatingPolicy("bad", jsonPatch(`[JSONPatch{op: "test", path: "/data/k", value: "other"}, JSONPatch{op: "add", path: "/data/x", value: "x"}]`))
	ignored := mutatingPolicy("ignored", jsonPatch(`[JSONPatch{op: "test", path: "/data/k", value: "other"}, JSONPatch{op: "add", path: "/data/x", value: "x"}]`))
	ignored.Spec.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	// Lists are atomic in the deduced schema this test merges with.
	atomic := mutatingPolicy("atomic", applyConfig(`Object{metadata: Object.metadata{finalizers: ["x"]}}`))
	needsParams := mutatingPolicy("needs-params", applyConfig(`Object{metadata: Object.metadata{labels: {"a": "b"}}}`))
	needsParams.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	allow := mutatingBinding("allow", "needs-params")
	allow.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "absent", ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)}
	deny := mutatingBinding("deny", "needs-params")
	deny.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: "absent", ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)}

	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		wantErr string
	}{
		{"fail", []runtime.Object{bad, mutatingBinding("b", "bad")},
			"policy 'bad' with binding 'b' denied request: "},
		{"atomic", []runtime.Object{atomic, mutatingBinding("b", "atomic")},
			"policy 'atomic' with binding 'b' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .metadata.finalizers"},
		{"ignore", []runtime.Object{ignored, mutatingBinding("b", "ignored")}, ""},
		{"params absent, Allow", []runtime.Object{needsParams, allow}, ""},
		{"params absent, Deny", []runtime.Object{needsParams, deny},
			"policy 'needs-params' with binding 'deny' denied request: no params found for policy binding with `Deny` parameterNotFoundAction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newMutating(t, tc.objs...)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}, Data: map[string]string{"k": "v"}}
			a := configMapCreate(cm)
			err := p.Admit(context.Background(), a)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Admit: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("Admit = %v, want %q...", err, tc.wantErr)
			case tc.wantErr != "" && (apierrors.ReasonForError(err) != metav1.StatusReasonInvalid || codeOf(err) != 403):
				t.Errorf("Admit = %v: want reason Invalid, code 403", err)
			}
			if got := a.Object.(*corev1.ConfigMap); len(got.Labels) != 0 || len(got.Data) != 1 {
				t.Errorf("a failed or skipped policy changed the object: %+v", got)
			}
		})
	}
}

// labelAfter is a mutating plugin that sets a label, standing for a later plugin or
// webhook that changes the object after a policy ran.
type labelAfter struct{ admission.Ops }

func (labelAfter) Admit(_ context.Context, a *admission.Attributes) error {
	cm := a.Object.(*corev1.ConfigMap)
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["late"] = "true"
	return nil
}

func TestMutatingAdmissionPolicyReinvocation(t *testing.T) {
	// The policy copies the label "late" into data; it runs before the label is set, so
	// only a reinvocation sees it.
	copyLate := func(policy admissionregistrationv1.ReinvocationPolicyType) *admissionregistrationv1.MutatingAdmissionPolicy {
		p := mutatingPolicy("copy", applyConfig(
			`Object{data: {"late": has(object.metadata.labels) && "late" in object.metadata.labels ? object.metadata.labels["late"] : "unset"}}`))
		p.Spec.ReinvocationPolicy = policy
		return p
	}
	for _, tc := range []struct {
		policy admissionregistrationv1.ReinvocationPolicyType
		want   string
	}{
		{admissionregistrationv1.NeverReinvocationPolicy, "unset"},
		{admissionregistrationv1.IfNeededReinvocationPolicy, "true"},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			chain := admission.NewChain(
				admission.Plugin{Name: MutatingPluginName, Handler: newMutating(t, copyLate(tc.policy), mutatingBinding("b", "copy"))},
				admission.Plugin{Name: "LabelAfter", Handler: labelAfter{admission.Ops{admission.Create}}},
			)
			a := configMapCreate(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}})
			if err := chain.Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if got := a.Object.(*corev1.ConfigMap).Data["late"]; got != tc.want {
				t.Errorf("data.late = %q, want %q", got, tc.want)
			}
		})
	}
}

func codeOf(err error) int32 {
	if st, ok := err.(apierrors.APIStatus); ok {
		return st.Status().Code
	}
	return 0
}
