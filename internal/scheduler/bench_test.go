package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// BenchmarkSchedule5000Nodes measures throughput through the whole scheduler (informers,
// queue, filters, scores, assume, async bind through the fake clientset) with 5,000
// nodes and pods that exist before the scheduler starts. It reports pods/s.
func BenchmarkSchedule5000Nodes(b *testing.B) {
	const nodes, pods = 5000, 3000
	for i := 0; i < b.N; i++ {
		objs := make([]runtime.Object, 0, nodes+pods)
		for n := 0; n < nodes; n++ {
			objs = append(objs, node(fmt.Sprintf("node-%04d", n), 32000, 65536,
				withLabels("topology.kubernetes.io/zone", fmt.Sprintf("zone-%d", n%5))))
		}
		for p := 0; p < pods; p++ {
			objs = append(objs, pod(fmt.Sprintf("pod-%05d", p), 100, 128, withPodLabels("app", fmt.Sprintf("app-%d", p%20))))
		}
		scheduleAll(b, objs, pods, "")
	}
}

// BenchmarkScheduleTopologySpreading is scheduler_perf's TopologySpreading shape through
// the whole scheduler: 5,000 nodes in 3 zones with 5,000 pods placed, then 2,000 pods
// spread over the zones (maxSkew 5, DoNotSchedule). It reports the spread pods' pods/s.
func BenchmarkScheduleTopologySpreading(b *testing.B) {
	const nodes, placed, pods = 5000, 5000, 2000
	for i := 0; i < b.N; i++ {
		objs := make([]runtime.Object, 0, nodes+placed+pods)
		for n := 0; n < nodes; n++ {
			objs = append(objs, node(fmt.Sprintf("node-%04d", n), 4000, 32768,
				withLabels("topology.kubernetes.io/zone", fmt.Sprintf("moon-%d", n%3))))
		}
		for p := 0; p < placed; p++ {
			objs = append(objs, pod(fmt.Sprintf("init-%05d", p), 100, 500, onNode(fmt.Sprintf("node-%04d", p%nodes))))
		}
		for p := 0; p < pods; p++ {
			objs = append(objs, pod(fmt.Sprintf("spread-%05d", p), 100, 500, withPodLabels("color", "blue"), func(p *v1.Pod) {
				p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 5, TopologyKey: "topology.kubernetes.io/zone",
					WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}}}}
			}))
		}
		scheduleAll(b, objs, pods, "spread-")
	}
}

// scheduleAll starts a scheduler on a fake clientset holding objs and reports the
// pods/s at which the pods named with prefix, pods of them, were bound.
func scheduleAll(b *testing.B, objs []runtime.Object, pods int, prefix string) {
	start := time.Now()
	//lint:ignore SA1019 the field-managed tracker costs ~25ms per write, which would dominate.
	env := startSchedulerWith(b, fake.NewSimpleClientset(objs...), nil)
	b.Logf("started after %v", time.Since(start))
	bound := 0
	err := pollUntil(func() (bool, error) {
		list, err := env.sched.podLister.List(labels.Everything())
		if err != nil {
			return false, nil
		}
		bound = 0
		for _, p := range list {
			if p.Spec.NodeName != "" && strings.HasPrefix(p.Name, prefix) {
				bound++
			}
		}
		return bound == pods, nil
	})
	elapsed := time.Since(start)
	if err != nil {
		b.Fatalf("%d of %d pods bound: %v", bound, pods, err)
	}
	b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
}
