package core

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestNodeDefaults(t *testing.T) {
	n := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
	nodesResource().Strategy.Default(n)
	if q := n.Status.Allocatable[corev1.ResourceCPU]; q.String() != "4" {
		t.Errorf("allocatable cpu = %s, want 4 from capacity", q.String())
	}
	if len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != "10.244.1.0/24" {
		t.Errorf("podCIDRs = %v", n.Spec.PodCIDRs)
	}
	dual := &corev1.Node{Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.2.0/24", "fd00:2::/64"}}}
	nodesResource().Strategy.Default(dual)
	if dual.Spec.PodCIDR != "10.244.2.0/24" {
		t.Errorf("podCIDR = %q, want the first of podCIDRs", dual.Spec.PodCIDR)
	}
}

func TestNodeValidate(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.NodeSpec
		want []string
	}{
		{"valid", corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:1::/64"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}}, nil},
		{"bad pod CIDR", corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0"}},
			[]string{`spec.podCIDRs[0]: Invalid value: "10.244.1.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`}},
		{"two IPv4 CIDRs", corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "10.244.2.0/24"}},
			[]string{`spec.podCIDRs: Invalid value: ["10.244.1.0/24","10.244.2.0/24"]: may specify no more than one CIDR for each IP family`}},
		{"taint effect", corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: "Sometimes"}}},
			[]string{`spec.taints[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`}},
		{"taint without effect", corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k"}}},
			[]string{`spec.taints[0].effect: Required value`}},
		{"duplicate taint", corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: "NoSchedule"}, {Key: "k", Value: "v", Effect: "NoSchedule"}}},
			[]string{`spec.taints[1]: Duplicate value: {"key":"k","value":"v","effect":"NoSchedule"}: taints must be unique by key and effect pair`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: tc.spec}
			assertErrors(t, nodesResource().Strategy.Validate(context.Background(), n), tc.want)
		})
	}
}

func TestNodeUpdate(t *testing.T) {
	old := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}, ProviderID: "fake://n1"}}
	tests := []struct {
		name   string
		mutate func(*corev1.Node)
		want   []string
	}{
		{"cordon", func(n *corev1.Node) { n.Spec.Unschedulable = true }, nil},
		{"add second family", func(n *corev1.Node) { n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, "fd00:1::/64") }, nil},
		{"change pod CIDR", func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.9.0/24"} },
			[]string{`spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid`}},
		{"change provider ID", func(n *corev1.Node) { n.Spec.ProviderID = "fake://other" },
			[]string{`spec.providerID: Forbidden: node updates may not change providerID except from "" to valid`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := old.DeepCopy()
			tc.mutate(n)
			assertErrors(t, nodesResource().Strategy.ValidateUpdate(context.Background(), n, old), tc.want)
		})
	}
}

func TestNodePrinter(t *testing.T) {
	ready := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: s}}
	}
	info := corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13", KernelVersion: "6.12.0", ContainerRuntimeVersion: "containerd://2.1.0"}
	tests := []struct {
		name string
		node corev1.Node
		want []interface{}
	}{{
		name: "ready control plane",
		node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master"}},
			Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionTrue), NodeInfo: info,
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "cp"}, {Type: corev1.NodeInternalIP, Address: "192.168.1.10"}}}},
		want: []interface{}{"cp", "Ready", "control-plane,master", "<unknown>", "v1.37.2", "192.168.1.10", "<none>", "Debian GNU/Linux 13", "6.12.0", "containerd://2.1.0"},
	}, {
		name: "not ready and cordoned",
		node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{Conditions: ready(corev1.ConditionUnknown)}},
		want: []interface{}{"w1", "NotReady,SchedulingDisabled", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
	}, {
		name: "no conditions yet",
		node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w2"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}}}},
		want: []interface{}{"w2", "Unknown", "<none>", "<unknown>", "", "<none>", "203.0.113.7", "<unknown>", "<unknown>", "<unknown>"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertRow(t, nodesResource().Printer.Row(&tc.node), tc.want)
		})
	}
	cordoned := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}
	if got := nodesResource().Fields(cordoned); !equality.Semantic.DeepEqual(got, fields.Set{"spec.unschedulable": "true"}) {
		t.Errorf("fields = %v", got)
	}
}
