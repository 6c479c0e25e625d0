package plugins

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

func TestEnabled(t *testing.T) {
	on, err := Enabled(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's order, whatever order the defaults are listed in.
	want := []string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition", "PodSecurity", "Priority",
		"DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection", "PersistentVolumeClaimResize", "RuntimeClass",
		"CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass",
		"PodTopologyLabels", "MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota"}
	if !slices.Equal(on, want) {
		t.Errorf("defaults:\n got %v\nwant %v", on, want)
	}
	on, err = Enabled([]string{"AlwaysDeny", "NamespaceExists"}, []string{"ServiceAccount", "ResourceQuota"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(on, "ServiceAccount") || slices.Contains(on, "ResourceQuota") || on[1] != "NamespaceExists" || on[len(on)-1] != "AlwaysDeny" {
		t.Errorf("adjusted: %v", on)
	}
	for _, tt := range []struct {
		enable, disable []string
		want            string
	}{
		{[]string{"Nope"}, nil, `enable-admission-plugins plugin "Nope" is unknown`},
		{nil, []string{"Nope"}, `disable-admission-plugins plugin "Nope" is unknown`},
		{[]string{"Priority"}, []string{"Priority"}, `[Priority] in enable-admission-plugins and disable-admission-plugins overlapped`},
		{[]string{"AlwaysPullImages"}, nil, `enable-admission-plugins plugin "AlwaysPullImages" is not implemented by mizzen`},
	} {
		if _, err := Enabled(tt.enable, tt.disable); err == nil || err.Error() != tt.want {
			t.Errorf("Enabled(%v, %v) = %v, want %q", tt.enable, tt.disable, err, tt.want)
		}
	}
}

// TestChainOrder: every mutating plugin runs before any validating one, so a
// validator sees the defaults mutators set (here LimitRanger's), and AlwaysDeny last.
func TestChainOrder(t *testing.T) {
	store := admissiontest.New(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}},
		&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{corev1.ResourceCPU: mustQ("1")},
			Max: corev1.ResourceList{corev1.ResourceCPU: mustQ("2")}}}}},
	)
	on, _ := Enabled(nil, []string{"ServiceAccount"})
	chain, err := New(on, admission.Deps{Reader: store, StatusWriter: store})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	a := &admission.Attributes{Operation: admission.Create, Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: "ns", Name: "p", Object: pod}
	if err := chain.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := chain.Validate(context.Background(), a); err != nil {
		t.Fatalf("a defaulted pod within the max: %v", err)
	}
	p := a.Object.(*corev1.Pod)
	if p.Spec.Containers[0].Resources.Limits.Cpu().String() != "1" || *p.Spec.Priority != 0 || len(p.Spec.Tolerations) != 2 {
		t.Errorf("mutated pod: %+v", p.Spec)
	}
	a.Operation = admission.Create
	a.Namespace = "missing"
	if err := chain.Validate(context.Background(), a); err == nil || err.Error() != `namespaces "missing" not found` {
		t.Errorf("missing namespace: %v", err)
	}
	deny, _ := New([]string{"AlwaysDeny"}, admission.Deps{Reader: store})
	if err := deny.Validate(context.Background(), a); err == nil || err.Error() != `pods "p" is forbidden: admission control is denying all modifications` {
		t.Errorf("AlwaysDeny: %v", err)
	}
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
