package validname

import (
	"reflect"
	"strings"
	"testing"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// seeds are strings at the edges of every pattern and limit.
var seeds = []string{
	"", "a", "A", "0", "-", ".", "_", "/", "a-b", "a--b", "-a", "a-", "a.b", "a..b", ".a", "a.",
	"a_b", "_a", "a_", "A.b", "a/b", "/b", "a/", "a/b/c", "example.com/MyName", "Example.com/name",
	"k8s.io/app", "node.kubernetes.io/not-ready", "a.-b", "a-.b", "a\nb", "a\n", "ä", "aä",
	"my.name", "123-abc", "kube-root-ca.crt", "kube-api-access-x7k2p", "pod-00001",
	strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
	strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 126) + "ab",
	strings.Repeat("a", 253) + "/b", "a/" + strings.Repeat("b", 63), "a/" + strings.Repeat("b", 64),
}

// checkSame fails t where a check here and apimachinery's disagree on s: in what they
// return, and so in whether s is valid.
func checkSame(t *testing.T, s string) {
	t.Helper()
	p := field.NewPath("metadata", "labels")
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"IsDNS1123Label", IsDNS1123Label(s), validation.IsDNS1123Label(s)},
		{"IsDNS1123Subdomain", IsDNS1123Subdomain(s), validation.IsDNS1123Subdomain(s)},
		{"IsQualifiedName", IsQualifiedName(s), validation.IsQualifiedName(s)},
		{"IsValidLabelValue", IsValidLabelValue(s), validation.IsValidLabelValue(s)},
		{"NameIsDNSSubdomain", NameIsDNSSubdomain(s, false), apivalidation.NameIsDNSSubdomain(s, false)},
		{"NameIsDNSSubdomain prefix", NameIsDNSSubdomain(s, true), apivalidation.NameIsDNSSubdomain(s, true)},
		{"ValidateLabelName", ValidateLabelName(s, p), nilIfEmpty(metav1validation.ValidateLabelName(s, p))},
		{"ValidateLabels key", ValidateLabels(map[string]string{s: "v"}, p), nilIfEmpty(metav1validation.ValidateLabels(map[string]string{s: "v"}, p))},
		{"ValidateLabels value", ValidateLabels(map[string]string{"k": s}, p), nilIfEmpty(metav1validation.ValidateLabels(map[string]string{"k": s}, p))},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s(%q) = %q, apimachinery's %q", c.name, s, c.got, c.want)
		}
	}
	checkSameObjectMeta(t, s)
}

// checkSameObjectMeta fails t where ValidateObjectMetaAccessor and apimachinery's
// disagree on metadata with s in each of its checked fields in turn.
func checkSameObjectMeta(t *testing.T, s string) {
	t.Helper()
	p := field.NewPath("metadata")
	valid := func() *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Name: "n", Namespace: "ns", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{"example.com/Note": "x"}, Finalizers: []string{"example.com/f"}}
	}
	for _, c := range []struct {
		name       string
		namespaced bool
		set        func(*metav1.ObjectMeta)
	}{
		{"name", true, func(m *metav1.ObjectMeta) { m.Name = s }},
		{"generateName", true, func(m *metav1.ObjectMeta) { m.GenerateName = s }},
		{"namespace", true, func(m *metav1.ObjectMeta) { m.Namespace = s }},
		{"namespace, cluster-scoped", false, func(m *metav1.ObjectMeta) { m.Namespace = s }},
		{"label key", true, func(m *metav1.ObjectMeta) { m.Labels[s] = "v" }},
		{"label value", true, func(m *metav1.ObjectMeta) { m.Labels["k"] = s }},
		{"annotation key", true, func(m *metav1.ObjectMeta) { m.Annotations[s] = "v" }},
		{"annotation value", true, func(m *metav1.ObjectMeta) { m.Annotations["k"] = s }},
		{"finalizer", true, func(m *metav1.ObjectMeta) { m.Finalizers = append(m.Finalizers, s) }},
		{"owner name", true, func(m *metav1.ObjectMeta) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: s, UID: "u"}}
		}},
		{"manager", true, func(m *metav1.ObjectMeta) {
			m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: s, Operation: metav1.ManagedFieldsOperationUpdate}}
		}},
	} {
		for _, nameFn := range []apivalidation.ValidateNameFunc{NameIsDNSSubdomain, apivalidation.NameIsDNSLabel} {
			m := valid()
			c.set(m)
			got := ValidateObjectMetaAccessor(m, c.namespaced, nameFn, p)
			want := nilIfEmpty(apivalidation.ValidateObjectMetaAccessor(m, c.namespaced, nameFn, p))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ValidateObjectMetaAccessor, %s %q = %q, apimachinery's %q", c.name, s, got, want)
			}
		}
	}
}

// nilIfEmpty is the error list as the checks here return no errors: nil.
func nilIfEmpty(errs field.ErrorList) field.ErrorList {
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func TestChecksAgreeWithApimachinery(t *testing.T) {
	for _, s := range seeds {
		checkSame(t, s)
	}
	// Annotations whose keys and values come to the size limit, and to a byte over
	// it (as an annotation's value, with the 18 bytes of the others).
	for _, n := range []int{apivalidation.TotalAnnotationSizeLimitB - 18, apivalidation.TotalAnnotationSizeLimitB - 17} {
		checkSameObjectMeta(t, strings.Repeat("v", n))
	}
}

// FuzzChecksAgreeWithApimachinery: go test -fuzz FuzzChecksAgreeWithApimachinery ./internal/registry/validname/
func FuzzChecksAgreeWithApimachinery(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(checkSame)
}

// The point of the package: a valid string is checked without allocating.
func TestValidStringsAllocateNothing(t *testing.T) {
	p := field.NewPath("spec", "tolerations")
	labels := map[string]string{"app": "bench", "tier": "backend", "app.kubernetes.io/name": "x"}
	allocs := testing.AllocsPerRun(100, func() {
		_ = IsDNS1123Label("kube-api-access-x7k2p")
		_ = IsDNS1123Subdomain("kube-root-ca.crt")
		_ = IsQualifiedName("node.kubernetes.io/not-ready")
		_ = IsValidLabelValue("backend")
		_ = NameIsDNSSubdomain("pod-00001", false)
		_ = ValidateLabelName("node.kubernetes.io/unreachable", p)
		_ = ValidateLabels(labels, p)
	})
	if allocs != 0 {
		t.Errorf("valid names and labels allocated %v times, want 0", allocs)
	}
}
