package affinityindex

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"mizzen/internal/scheduler/framework"
)

func node(name string, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}}})
	return ni
}

func pod(name, app string, sel *metav1.LabelSelector) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{"app": app}}}
	if sel != nil {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{TopologyKey: v1.LabelHostname, LabelSelector: sel}}}}
	}
	return p
}

// TestMatchingKeepsSelectorsApart checks that selectors printing alike are counted
// apart: an empty selector selects every pod, a missing one none.
func TestMatchingKeepsSelectorsApart(t *testing.T) {
	noSelector := pod("none", "x", nil)
	noSelector.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: v1.LabelHostname}}}}
	x := Build([]*framework.NodeInfo{
		node("n1", pod("all", "x", &metav1.LabelSelector{}), noSelector),
		node("n2", pod("web", "web", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}})),
		node("n3", pod("plain", "web", nil)),
	})
	tests := []struct {
		name string
		term *v1.Pod
		want int64 // pods counted in namespace ns
	}{
		{name: "empty selector", term: pod("q", "q", &metav1.LabelSelector{}), want: 4},
		{name: "no selector", term: noSelector, want: 0},
		{name: "app=web", term: pod("q", "q", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}), want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pi := framework.NewPodInfo(tt.term)
			counts, ok := x.Matching(pi.RequiredAntiAffinityTerms, func(string) labels.Set { return nil })
			if !ok {
				t.Fatalf("not indexed: %s", x)
			}
			var got int64
			for _, c := range counts {
				got += c.Total
			}
			if got != tt.want {
				t.Errorf("counted %d pods, want %d\n%s", got, tt.want, x)
			}
		})
	}
}
