package scheduler

import (
	"fmt"
	"testing"
	"time"

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
				if p.Spec.NodeName != "" {
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
}
