package quota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CrossNamespacePodAffinity scope holds the pods whose affinity terms name other
// namespaces, by list or by selector, and no others.
func TestCrossNamespacePodAffinityScope(t *testing.T) {
	scoped := func(op corev1.ScopeSelectorOperator) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{
			MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopeCrossNamespacePodAffinity, Operator: op}}}}}
	}
	withTerm := func(term corev1.PodAffinityTerm) *corev1.Pod {
		term.TopologyKey = "region"
		return &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}}}
	}
	preferred := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1,
			PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "zone", NamespaceSelector: &metav1.LabelSelector{}}}}}}}}
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		uses bool
	}{
		"no affinity":            {&corev1.Pod{}, false},
		"own namespace":          {withTerm(corev1.PodAffinityTerm{}), false},
		"namespaces":             {withTerm(corev1.PodAffinityTerm{Namespaces: []string{"ns1"}}), true},
		"namespace selector":     {withTerm(corev1.PodAffinityTerm{NamespaceSelector: &metav1.LabelSelector{}}), true},
		"preferred and selector": {preferred, true},
	} {
		if got := PodInScope(c.pod, scoped(corev1.ScopeSelectorOpExists)); got != c.uses {
			t.Errorf("%s: in scope (Exists) %v, want %v", name, got, c.uses)
		}
		if got := PodInScope(c.pod, scoped(corev1.ScopeSelectorOpDoesNotExist)); got == c.uses {
			t.Errorf("%s: in scope (DoesNotExist) %v, want %v", name, got, !c.uses)
		}
	}
}
