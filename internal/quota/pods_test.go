package quota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// Huge pages and extended resources count as the scheduler sees them (the heavier of
// the init step and the containers, plus overhead); native and quota-shaped names are
// left to the callers' cpu, memory and ephemeral-storage figures.
func TestPodOtherRequests(t *testing.T) {
	req := func(kv ...string) corev1.ResourceRequirements {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return corev1.ResourceRequirements{Requests: l}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: req("example.com/dongle", "5", "hugepages-2Mi", "2Mi")}},
		Containers: []corev1.Container{
			{Name: "a", Resources: req("example.com/dongle", "1", "cpu", "1", "hugepages-2Mi", "4Mi")},
			{Name: "b", Resources: req("example.com/dongle", "1", "kubernetes.io/reserved", "1")},
		},
		Overhead: corev1.ResourceList{"example.com/dongle": resource.MustParse("1")},
	}}
	got := PodOtherRequests(pod)
	want := map[corev1.ResourceName]string{"requests.example.com/dongle": "6", "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi"}
	if len(got) != len(want) {
		t.Errorf("PodOtherRequests = %v, want %v", got, want)
	}
	for name, w := range want {
		if q := got[name]; q.String() != w {
			t.Errorf("%s = %s, want %s", name, q.String(), w)
		}
	}
	if res, limits, ok := ComputeResource("hugepages-2Mi"); res != "hugepages-2Mi" || limits || !ok {
		t.Errorf(`ComputeResource("hugepages-2Mi") = %s, %v, %v; want its requests`, res, limits, ok)
	}
}
