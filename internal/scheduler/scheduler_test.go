package scheduler

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestPlacement(t *testing.T) {
	tests := []struct {
		name     string
		nodes    []*v1.Node
		existing []*v1.Pod
		pod      *v1.Pod
		// want lists the acceptable nodes.
		want []string
	}{
		{
			name:  "fits only where cpu is free",
			nodes: []*v1.Node{node("small", 1000, 4096), node("big", 4000, 4096)},
			pod:   pod("p", 2000, 0),
			want:  []string{"big"},
		},
		{
			name:     "existing pods use up a node",
			nodes:    []*v1.Node{node("a", 2000, 4096), node("b", 2000, 4096)},
			existing: []*v1.Pod{pod("old", 1500, 0, onNode("a"))},
			pod:      pod("p", 1000, 0),
			want:     []string{"b"},
		},
		{
			name:  "nodeSelector",
			nodes: []*v1.Node{node("a", 2000, 4096), node("b", 2000, 4096, withLabels("disk", "ssd"))},
			pod:   pod("p", 100, 0, func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} }),
			want:  []string{"b"},
		},
		{
			name:  "untolerated NoSchedule taint",
			nodes: []*v1.Node{node("a", 2000, 4096, withTaint("dedicated", "gpu", v1.TaintEffectNoSchedule)), node("b", 2000, 4096)},
			pod:   pod("p", 100, 0),
			want:  []string{"b"},
		},
		{
			name:  "PreferNoSchedule scores down",
			nodes: []*v1.Node{node("a", 2000, 4096, withTaint("spot", "", v1.TaintEffectPreferNoSchedule)), node("b", 2000, 4096)},
			pod:   pod("p", 100, 0),
			want:  []string{"b"},
		},
		{
			name: "tolerated taint allows the node",
			nodes: []*v1.Node{
				node("a", 2000, 4096, withTaint("dedicated", "gpu", v1.TaintEffectNoSchedule)),
				node("b", 500, 4096),
			},
			pod: pod("p", 1000, 0, func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
			}),
			want: []string{"a"},
		},
		{
			name:  "cordoned node",
			nodes: []*v1.Node{node("a", 4000, 4096, func(n *v1.Node) { n.Spec.Unschedulable = true }), node("b", 2000, 4096)},
			pod:   pod("p", 100, 0),
			want:  []string{"b"},
		},
		{
			name:  "spec.nodeName-less pod with required node affinity",
			nodes: []*v1.Node{node("a", 2000, 4096, withLabels("zone", "z1")), node("b", 2000, 4096, withLabels("zone", "z2"))},
			pod: pod("p", 100, 0, func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
						MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"z2"}}},
					}}},
				}}
			}),
			want: []string{"b"},
		},
		{
			name:  "preferred node affinity",
			nodes: []*v1.Node{node("a", 2000, 4096, withLabels("zone", "z1")), node("b", 2000, 4096, withLabels("zone", "z2"))},
			pod: pod("p", 100, 0, func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 50, Preference: v1.NodeSelectorTerm{
						MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"z1"}}},
					}}},
				}}
			}),
			want: []string{"a"},
		},
		{
			name:     "host port in use",
			nodes:    []*v1.Node{node("a", 2000, 4096), node("b", 2000, 4096)},
			existing: []*v1.Pod{pod("old", 0, 0, onNode("a"), withHostPort(8080))},
			pod:      pod("p", 0, 0, withHostPort(8080)),
			want:     []string{"b"},
		},
		{
			name:     "max pods",
			nodes:    []*v1.Node{node("a", 2000, 4096, withPodCapacity(1)), node("b", 100, 4096)},
			existing: []*v1.Pod{pod("old", 0, 0, onNode("a"))},
			pod:      pod("p", 0, 0),
			want:     []string{"b"},
		},
		{
			name:     "least allocated spreads",
			nodes:    []*v1.Node{node("a", 4000, 4096), node("b", 4000, 4096)},
			existing: []*v1.Pod{pod("old", 3000, 3000, onNode("a"))},
			pod:      pod("p", 500, 500),
			want:     []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tt.nodes {
				objs = append(objs, n)
			}
			for _, p := range tt.existing {
				objs = append(objs, p)
			}
			env := startScheduler(t, nil, objs...)
			env.createPod(tt.pod)
			got := env.waitScheduled(tt.pod.Namespace, tt.pod.Name)
			ok := false
			for _, w := range tt.want {
				ok = ok || w == got
			}
			if !ok {
				t.Errorf("pod placed on %q, want one of %v", got, tt.want)
			}
		})
	}
}

func withHostPort(port int32) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: v1.ProtocolTCP})
	}
}
