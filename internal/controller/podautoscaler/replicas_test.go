package podautoscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testCalculator() *calculator {
	return &calculator{tolerance: tolerances{0.1, 0.1}, cpuInitializationPeriod: 5 * time.Minute,
		delayOfInitialReadinessStatus: 30 * time.Second, now: func() time.Time { return t0 }}
}

func pending(name string) *corev1.Pod {
	p := readyPod(name, 100)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return p
}

func deleting(name string) *corev1.Pod {
	p := readyPod(name, 100)
	now := metav1.NewTime(t0)
	p.DeletionTimestamp = &now
	return p
}

// starting is a pod started a minute ago that became ready 20 s ago: a sample
// covering time before that is not trusted for CPU.
func starting(name string) *corev1.Pod {
	p := readyPod(name, 100)
	start, ready := metav1.NewTime(t0.Add(-time.Minute)), metav1.NewTime(t0.Add(-20*time.Second))
	p.Status.StartTime = &start
	p.Status.Conditions[0].LastTransitionTime = ready
	return p
}

func TestResourceReplicas(t *testing.T) {
	cases := []struct {
		name        string
		current     int32
		target      int32
		pods        []*corev1.Pod
		usage       map[string]int64
		want        int32
		wantUtil    int32
		wantErrText string
	}{
		{name: "ratio times ready pods", current: 2, target: 50, pods: []*corev1.Pod{readyPod("a", 100), readyPod("b", 100)},
			usage: map[string]int64{"a": 90, "b": 80}, want: 4, wantUtil: 85},
		{name: "within tolerance", current: 3, target: 50, pods: []*corev1.Pod{readyPod("a", 100), readyPod("b", 100), readyPod("c", 100)},
			usage: map[string]int64{"a": 54, "b": 54, "c": 54}, want: 3, wantUtil: 54},
		{name: "scaling up, unready pods count as idle", current: 3, target: 50,
			pods:  []*corev1.Pod{readyPod("a", 100), readyPod("b", 100), pending("c")},
			usage: map[string]int64{"a": 100, "b": 100}, want: 4, wantUtil: 100},
		{name: "scaling up, pods without samples count as idle", current: 3, target: 50,
			pods:  []*corev1.Pod{readyPod("a", 100), readyPod("b", 100), readyPod("c", 100)},
			usage: map[string]int64{"a": 200, "b": 200}, want: 8, wantUtil: 200},
		{name: "scaling down, pods without samples count as at their request", current: 3, target: 80,
			pods:  []*corev1.Pod{readyPod("a", 100), readyPod("b", 100), readyPod("c", 100)},
			usage: map[string]int64{"a": 10, "b": 10}, want: 2, wantUtil: 10},
		{name: "a starting pod's CPU is not trusted", current: 2, target: 50,
			pods:  []*corev1.Pod{readyPod("a", 100), starting("b")},
			usage: map[string]int64{"a": 100, "b": 300}, want: 2, wantUtil: 100},
		{name: "deleted pods are ignored", current: 2, target: 50, pods: []*corev1.Pod{deleting("a"), readyPod("b", 100)},
			usage: map[string]int64{"a": 100, "b": 100}, want: 2, wantUtil: 100},
		{name: "no pods", current: 1, target: 50, usage: map[string]int64{"a": 1},
			wantErrText: "no pods returned by selector while calculating replica count"},
		{name: "only unready pods", current: 1, target: 50, pods: []*corev1.Pod{pending("a")}, usage: map[string]int64{"a": 1},
			wantErrText: "did not receive metrics for targeted pods (pods might be unready)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, util, _, err := testCalculator().resourceReplicas(tc.current, tc.target, corev1.ResourceCPU, "", tc.pods, cpuSamples(tc.usage))
			if tc.wantErrText != "" {
				if err == nil || err.Error() != tc.wantErrText {
					t.Fatalf("err %v, want %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || util != tc.wantUtil {
				t.Errorf("replicas %d utilization %d, want %d and %d", got, util, tc.want, tc.wantUtil)
			}
		})
	}
}

func TestPlainAndWholeMetricReplicas(t *testing.T) {
	c := testCalculator()
	pods := []*corev1.Pod{readyPod("a", 100), readyPod("b", 100)}
	if got, avg, err := c.plainReplicas(2, 100, "", pods, cpuSamples(map[string]int64{"a": 200, "b": 200})); err != nil || got != 4 || avg != 200 {
		t.Errorf("pods metric: %d avg %d err %v, want 4 avg 200", got, avg, err)
	}
	if got, perPod := c.perPodReplicas(2, 500, 100); got != 5 || perPod != 250 {
		t.Errorf("per-pod total: %d (%d per pod), want 5 (250)", got, perPod)
	}
	if got, _ := c.perPodReplicas(5, 520, 100); got != 5 {
		t.Errorf("per-pod total within tolerance: %d, want 5", got)
	}
	list := func() ([]*corev1.Pod, error) { return pods, nil }
	if got, err := c.ratioReplicas(2, 1.5, list); err != nil || got != 3 {
		t.Errorf("value target: %d err %v, want 3", got, err)
	}
	if got, err := c.ratioReplicas(0, 2.5, list); err != nil || got != 3 {
		t.Errorf("value target from zero: %d err %v, want 3", got, err)
	}
}

// TestBehaviorTolerance: a scale-up tolerance of 0.5 lets a ratio of 1.4 stand, while
// the default 0.1 would scale.
func TestBehaviorTolerance(t *testing.T) {
	pods := []*corev1.Pod{readyPod("a", 100), readyPod("b", 100)}
	usage := cpuSamples(map[string]int64{"a": 70, "b": 70})
	hpa := cpuHPA(50, 1, 10, nil)
	if got, _, _, _ := testCalculator().forHPA(hpa).resourceReplicas(2, 50, corev1.ResourceCPU, "", pods, usage); got != 3 {
		t.Errorf("default tolerance: %d replicas, want 3", got)
	}
	q := resource.MustParse("0.5")
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: &q}}
	if got, _, _, _ := testCalculator().forHPA(hpa).resourceReplicas(2, 50, corev1.ResourceCPU, "", pods, usage); got != 2 {
		t.Errorf("scale-up tolerance 0.5: %d replicas, want 2", got)
	}
}
