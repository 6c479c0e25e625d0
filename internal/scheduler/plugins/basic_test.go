package plugins

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestNodeName(t *testing.T) {
	h := newHandle([]*v1.Node{mkNode("a", 1000, 1024), mkNode("b", 1000, 1024)}, nil)
	tests := []struct {
		name     string
		nodeName string
		want     map[string]string
	}{
		{"no nodeName fits anywhere", "", map[string]string{"a": "", "b": ""}},
		{"nodeName pins the node", "b", map[string]string{"a": "UnschedulableAndUnresolvable: node(s) didn't match the requested node name", "b": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mkPod("p", 0, 0, "")
			p.Spec.NodeName = tt.nodeName
			if got := runFilter(t, &NodeName{}, h, p); !eqMap(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeUnschedulable(t *testing.T) {
	cordoned := mkNode("cordoned", 1000, 1024)
	cordoned.Spec.Unschedulable = true
	h := newHandle([]*v1.Node{cordoned, mkNode("ok", 1000, 1024)}, nil)
	tests := []struct {
		name        string
		tolerations []v1.Toleration
		want        map[string]string
	}{
		{"cordoned node rejected", nil, map[string]string{"cordoned": "UnschedulableAndUnresolvable: node(s) were unschedulable", "ok": ""}},
		{"toleration of the unschedulable taint", []v1.Toleration{{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
			map[string]string{"cordoned": "", "ok": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mkPod("p", 0, 0, "")
			p.Spec.Tolerations = tt.tolerations
			if got := runFilter(t, &NodeUnschedulable{}, h, p); !eqMap(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTaintToleration(t *testing.T) {
	gpu := mkNode("gpu", 1000, 1024)
	gpu.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	exec := mkNode("exec", 1000, 1024)
	exec.Spec.Taints = []v1.Taint{{Key: "evict", Effect: v1.TaintEffectNoExecute}}
	soft := mkNode("soft", 1000, 1024)
	soft.Spec.Taints = []v1.Taint{{Key: "spot", Value: "yes", Effect: v1.TaintEffectPreferNoSchedule}, {Key: "old", Effect: v1.TaintEffectPreferNoSchedule}}
	h := newHandle([]*v1.Node{gpu, exec, soft, mkNode("plain", 1000, 1024)}, nil)
	pl, _ := NewTaintToleration(nil, h)
	tt := pl.(*TaintToleration)

	filterTests := []struct {
		name        string
		tolerations []v1.Toleration
		want        map[string]string
	}{
		{"no tolerations", nil, map[string]string{
			"gpu":  "UnschedulableAndUnresolvable: node(s) had untolerated taint {dedicated: gpu}",
			"exec": "UnschedulableAndUnresolvable: node(s) had untolerated taint {evict: }",
			"soft": "", "plain": "",
		}},
		{"Equal toleration", []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "gpu", Effect: v1.TaintEffectNoSchedule}}, map[string]string{
			"gpu": "", "exec": "UnschedulableAndUnresolvable: node(s) had untolerated taint {evict: }", "soft": "", "plain": "",
		}},
		{"wrong value", []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "tpu"}}, map[string]string{
			"gpu":  "UnschedulableAndUnresolvable: node(s) had untolerated taint {dedicated: gpu}",
			"exec": "UnschedulableAndUnresolvable: node(s) had untolerated taint {evict: }", "soft": "", "plain": "",
		}},
		{"tolerate everything", []v1.Toleration{{Operator: v1.TolerationOpExists}}, map[string]string{"gpu": "", "exec": "", "soft": "", "plain": ""}},
	}
	for _, c := range filterTests {
		t.Run("filter/"+c.name, func(t *testing.T) {
			p := mkPod("p", 0, 0, "")
			p.Spec.Tolerations = c.tolerations
			if got := runFilter(t, tt, h, p); !eqMap(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}

	scoreTests := []struct {
		name        string
		tolerations []v1.Toleration
		want        map[string]int64
	}{
		{"two untolerated PreferNoSchedule taints score lowest", nil, map[string]int64{"gpu": 100, "exec": 100, "soft": 0, "plain": 100}},
		{"one remaining untolerated taint still scores lowest", []v1.Toleration{{Key: "spot", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule}},
			map[string]int64{"gpu": 100, "exec": 100, "soft": 0, "plain": 100}},
		{"all tolerated", []v1.Toleration{{Operator: v1.TolerationOpExists}}, map[string]int64{"gpu": 100, "exec": 100, "soft": 100, "plain": 100}},
	}
	for _, c := range scoreTests {
		t.Run("score/"+c.name, func(t *testing.T) {
			p := mkPod("p", 0, 0, "")
			p.Spec.Tolerations = c.tolerations
			if got := runScore(t, tt, h, p); !eqMap(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestNodeAffinity(t *testing.T) {
	h := newHandle([]*v1.Node{mkNode("a", 1000, 1024, "zone", "z1", "disk", "ssd"), mkNode("b", 1000, 1024, "zone", "z2")}, nil)
	const miss = "UnschedulableAndUnresolvable: node(s) didn't match Pod's node affinity/selector"
	req := func(terms ...v1.NodeSelectorTerm) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	expr := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	tests := []struct {
		name     string
		selector map[string]string
		affinity *v1.Affinity
		args     string
		want     map[string]string
	}{
		{"nodeSelector", map[string]string{"disk": "ssd"}, nil, "", map[string]string{"a": "", "b": miss}},
		{"In", nil, req(expr("zone", v1.NodeSelectorOpIn, "z2")), "", map[string]string{"a": miss, "b": ""}},
		{"NotIn", nil, req(expr("zone", v1.NodeSelectorOpNotIn, "z2")), "", map[string]string{"a": "", "b": miss}},
		{"DoesNotExist", nil, req(expr("disk", v1.NodeSelectorOpDoesNotExist)), "", map[string]string{"a": miss, "b": ""}},
		{"terms are ORed", nil, req(expr("zone", v1.NodeSelectorOpIn, "z1"), expr("zone", v1.NodeSelectorOpIn, "z2")), "", map[string]string{"a": "", "b": ""}},
		{"metadata.name field narrows in PreFilter", nil, req(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}}), "",
			map[string]string{"a": miss, "b": ""}},
		{"addedAffinity from args", nil, nil, `{"addedAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["z1"]}]}]}}}`,
			map[string]string{"a": "", "b": "UnschedulableAndUnresolvable: node(s) didn't match scheduler-enforced node affinity"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, err := NewNodeAffinity(json.RawMessage(tt.args), h)
			if err != nil {
				t.Fatal(err)
			}
			p := mkPod("p", 0, 0, "")
			p.Spec.NodeSelector = tt.selector
			p.Spec.Affinity = tt.affinity
			if got := runFilter(t, pl.(*NodeAffinity), h, p); !eqMap(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("preferred terms score by weight", func(t *testing.T) {
		pl, _ := NewNodeAffinity(nil, h)
		p := mkPod("p", 0, 0, "")
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
			{Weight: 20, Preference: expr("zone", v1.NodeSelectorOpIn, "z1")},
			{Weight: 80, Preference: expr("zone", v1.NodeSelectorOpIn, "z2")},
		}}}
		want := map[string]int64{"a": 25, "b": 100}
		if got := runScore(t, pl.(*NodeAffinity), h, p); !eqMap(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestNodePorts(t *testing.T) {
	withPort := func(p *v1.Pod, ip string, port int32, proto v1.Protocol) *v1.Pod {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{HostIP: ip, HostPort: port, ContainerPort: port, Protocol: proto})
		return p
	}
	h := newHandle([]*v1.Node{mkNode("a", 1000, 1024), mkNode("b", 1000, 1024)}, []*v1.Pod{
		withPort(mkPod("web", 0, 0, "a"), "", 80, v1.ProtocolTCP),
		withPort(mkPod("dns", 0, 0, "b"), "10.0.0.1", 53, v1.ProtocolUDP),
	})
	const busy = "Unschedulable: node(s) didn't have free ports for the requested pod ports"
	tests := []struct {
		name  string
		ip    string
		port  int32
		proto v1.Protocol
		want  map[string]string
	}{
		{"same port on all IPs conflicts", "", 80, v1.ProtocolTCP, map[string]string{"a": busy, "b": ""}},
		{"other protocol is free", "", 80, v1.ProtocolUDP, map[string]string{"a": "", "b": ""}},
		{"specific IP conflicts with 0.0.0.0", "10.0.0.2", 80, v1.ProtocolTCP, map[string]string{"a": busy, "b": ""}},
		{"0.0.0.0 conflicts with a specific IP", "", 53, v1.ProtocolUDP, map[string]string{"a": "", "b": busy}},
		{"different specific IP is free", "10.0.0.2", 53, v1.ProtocolUDP, map[string]string{"a": "", "b": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := withPort(mkPod("p", 0, 0, ""), tt.ip, tt.port, tt.proto)
			if got := runFilter(t, &NodePorts{}, h, p); !eqMap(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestImageLocality(t *testing.T) {
	withImages := func(n *v1.Node, size int64, names ...string) *v1.Node {
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: names, SizeBytes: size})
		return n
	}
	const mb = 1024 * 1024
	h := newHandle([]*v1.Node{
		withImages(mkNode("has-big", 1000, 1024), 500*mb, "docker.io/library/big:latest"),
		withImages(withImages(mkNode("has-both", 1000, 1024), 500*mb, "docker.io/library/big:latest"), 10*mb, "small:v1"),
		mkNode("none", 1000, 1024),
	}, nil)
	p := mkPod("p", 0, 0, "")
	p.Spec.Containers[0].Image = "big"
	// 500MB spread over 2 of 3 nodes counts as 333MB: (333-23)/(1000-23)*100 = 31.
	want := map[string]int64{"has-big": 31, "has-both": 31, "none": 0}
	if got := runScore(t, &ImageLocality{handle: h}, h, p); !eqMap(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNodeResourcesFitFilter(t *testing.T) {
	n := mkNode("n", 2000, 2048)
	n.Status.Allocatable["example.com/gpu"] = resource.MustParse("1")
	n.Status.Allocatable[v1.ResourcePods] = resource.MustParse("2")
	h := newHandle([]*v1.Node{n}, []*v1.Pod{mkPod("existing", 1000, 1024, "n")})
	pl, _ := NewNodeResourcesFit(nil, h)
	gpu := func(p *v1.Pod, count string) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse(count)
		return p
	}
	tests := []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"fits", mkPod("p", 1000, 1024, ""), ""},
		{"cpu", mkPod("p", 1001, 0, ""), "Unschedulable: Insufficient cpu"},
		{"cpu and memory", mkPod("p", 1500, 1500, ""), "Unschedulable: Insufficient cpu, Insufficient memory"},
		{"extended resource fits", gpu(mkPod("p", 0, 0, ""), "1"), ""},
		{"extended resource", gpu(mkPod("p", 0, 0, ""), "2"), "Unschedulable: Insufficient example.com/gpu"},
		{"init container larger than containers", func() *v1.Pod {
			p := mkPod("p", 100, 0, "")
			p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}}}
			return p
		}(), "Unschedulable: Insufficient cpu"},
		{"pod overhead counts", func() *v1.Pod {
			p := mkPod("p", 900, 0, "")
			p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}
			return p
		}(), "Unschedulable: Insufficient cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runFilter(t, pl.(*NodeResourcesFit), h, tt.pod)["n"]; got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("max pods", func(t *testing.T) {
		h := newHandle([]*v1.Node{n}, []*v1.Pod{mkPod("e1", 0, 0, "n"), mkPod("e2", 0, 0, "n")})
		if got := runFilter(t, pl.(*NodeResourcesFit), h, mkPod("p", 0, 0, ""))["n"]; got != "Unschedulable: Too many pods" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("ignored resource group", func(t *testing.T) {
		ignoring, err := NewNodeResourcesFit(json.RawMessage(`{"ignoredResourceGroups":["example.com"]}`), h)
		if err != nil {
			t.Fatal(err)
		}
		if got := runFilter(t, ignoring.(*NodeResourcesFit), h, gpu(mkPod("p", 0, 0, ""), "5"))["n"]; got != "" {
			t.Errorf("got %q, want fit", got)
		}
	})
}

func TestNodeResourcesFitScore(t *testing.T) {
	// empty: nothing requested; half: 2000m of 4000m and 4Gi of 8Gi requested.
	h := newHandle([]*v1.Node{mkNode("empty", 4000, 8192), mkNode("half", 4000, 8192)}, []*v1.Pod{mkPod("e", 2000, 4096, "half")})
	pod := mkPod("p", 1000, 2048, "")
	tests := []struct {
		name string
		args string
		want map[string]int64
	}{
		// LeastAllocated: empty (3000/4000, 6/8) = 75; half (1000/4000, 2/8) = 25.
		{"LeastAllocated", "", map[string]int64{"empty": 75, "half": 25}},
		{"MostAllocated", `{"scoringStrategy":{"type":"MostAllocated"}}`, map[string]int64{"empty": 25, "half": 75}},
		// Shape 0%->10, 100%->0 behaves like LeastAllocated.
		{"RequestedToCapacityRatio", `{"scoringStrategy":{"type":"RequestedToCapacityRatio","requestedToCapacityRatio":{"shape":[{"utilization":0,"score":10},{"utilization":100,"score":0}]}}}`,
			map[string]int64{"empty": 75, "half": 25}},
		// Weights: cpu only.
		{"resource weights", `{"scoringStrategy":{"type":"MostAllocated","resources":[{"name":"cpu","weight":1}]}}`, map[string]int64{"empty": 25, "half": 75}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, err := NewNodeResourcesFit(json.RawMessage(tt.args), h)
			if err != nil {
				t.Fatal(err)
			}
			if got := runScore(t, pl.(*NodeResourcesFit), h, pod); !eqMap(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := NewNodeResourcesFit(json.RawMessage(`{"scoringStrategy":{"type":"Bogus"}}`), h); err == nil {
		t.Error("unknown strategy accepted")
	}
}

func TestBalancedAllocation(t *testing.T) {
	// With the pod: balanced has cpu 50%, mem 50%; skewed has cpu 75%, mem 25%.
	h := newHandle([]*v1.Node{mkNode("balanced", 4000, 4096), mkNode("skewed", 4000, 4096)}, []*v1.Pod{
		mkPod("b", 1000, 1024, "balanced"),
		mkPod("s", 2000, 0, "skewed"),
	})
	pl, _ := NewBalancedAllocation(nil, h)
	pod := mkPod("p", 1000, 1024, "")
	// skewed: existing pod without memory request counts 200Mi by default.
	got := runScore(t, pl.(*BalancedAllocation), h, pod)
	if got["balanced"] != 100 {
		t.Errorf("balanced node scored %d, want 100", got["balanced"])
	}
	if got["skewed"] >= got["balanced"] {
		t.Errorf("skewed node scored %d, not below balanced %d", got["skewed"], got["balanced"])
	}
}
