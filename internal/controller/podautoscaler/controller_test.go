package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fakeMetrics serves fixed samples; a nil map with err set fails the read.
type fakeMetrics struct {
	resource PodMetrics
	err      error
	object   int64
	external []int64
	// containers records the container each resource metric was asked for ("" for
	// the whole pod).
	containers []string
}

func (f *fakeMetrics) ResourceMetric(_ context.Context, _ corev1.ResourceName, _ string, _ labels.Selector, container string) (PodMetrics, time.Time, error) {
	f.containers = append(f.containers, container)
	if f.err != nil {
		return nil, time.Time{}, f.err
	}
	return f.resource, t0, nil
}

func (f *fakeMetrics) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (PodMetrics, time.Time, error) {
	if f.err != nil {
		return nil, time.Time{}, f.err
	}
	return f.resource, t0, nil
}

func (f *fakeMetrics) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	if f.err != nil {
		return 0, time.Time{}, f.err
	}
	return f.object, t0, nil
}

func (f *fakeMetrics) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	if f.err != nil {
		return nil, time.Time{}, f.err
	}
	return f.external, t0, nil
}

// readyPod is a running pod started long ago, ready, requesting cpu (millicores).
func readyPod(name string, cpu int64) *corev1.Pod {
	start := metav1.NewTime(t0.Add(-time.Hour))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start}}},
	}
}

func cpuSamples(values map[string]int64) PodMetrics {
	m := PodMetrics{}
	for pod, v := range values {
		m[pod] = PodMetric{Timestamp: t0.Add(-10 * time.Second), Window: 15 * time.Second, Value: v}
	}
	return m
}

func cpuHPA(target int32, minR, maxR int32, behavior *autoscalingv2.HorizontalPodAutoscalerBehavior) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR, MaxReplicas: maxR,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}},
			Behavior: behavior,
		},
	}
}

// harness is a controller over fake clients: one Deployment "web" with a scale
// subresource, the pods and metrics a case gives, and a clock the case moves.
type harness struct {
	c        *Controller
	client   *fake.Clientset
	scales   *scalefake.FakeScaleClient
	recorder *record.FakeRecorder
	clock    *testingclock.FakeClock
	replicas int32
	writes   []int32
	metrics  *fakeMetrics
	// hpaIndexer is the controller's HPA cache, fed each status the controller writes.
	hpaIndexer cache.Indexer
}

func newHarness(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, replicas int32, pods []*corev1.Pod, m *fakeMetrics) *harness {
	h := &harness{client: fake.NewClientset(hpa), scales: &scalefake.FakeScaleClient{}, recorder: record.NewFakeRecorder(100),
		clock: testingclock.NewFakeClock(t0), replicas: replicas, metrics: m}
	h.scales.AddReactor("get", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		return true, h.scale(), nil
	})
	h.scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		s := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		h.replicas = s.Spec.Replicas
		h.writes = append(h.writes, s.Spec.Replicas)
		return true, h.scale(), nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	f := informers.NewSharedInformerFactory(h.client, 0)
	hpaInf, podInf := f.Autoscaling().V2().HorizontalPodAutoscalers(), f.Core().V1().Pods()
	h.c = New(h.client, hpaInf, podInf, h.scales, mapper, m, Options{}, h.clock)
	h.c.recorder = h.recorder
	h.hpaIndexer = hpaInf.Informer().GetIndexer()
	if err := h.hpaIndexer.Add(hpa); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := podInf.Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *harness) scale() *autoscalingv1.Scale {
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: autoscalingv1.ScaleSpec{Replicas: h.replicas}, Status: autoscalingv1.ScaleStatus{Replicas: h.replicas, Selector: "app=web"}}
}

// sync runs one sync and feeds the status written back into the lister, as the
// informer would.
func (h *harness) sync(t *testing.T) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	if err := h.c.Sync(context.Background(), "default/web"); err != nil && !strings.HasPrefix(err.Error(), "requeue after") {
		t.Fatalf("sync: %v", err)
	}
	hpa, err := h.client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.hpaIndexer.Update(hpa); err != nil {
		t.Fatal(err)
	}
	return hpa
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func conditions(hpa *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	for _, c := range hpa.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	sort.Strings(out)
	return out
}

func TestReconcileResourceUtilization(t *testing.T) {
	pods := []*corev1.Pod{readyPod("a", 100), readyPod("b", 100)}
	cases := []struct {
		name       string
		hpa        *autoscalingv2.HorizontalPodAutoscaler
		replicas   int32
		pods       []*corev1.Pod
		metrics    *fakeMetrics
		wantWrites []int32
		wantConds  []string
		wantEvents []string
		wantTarget string // the status's current utilization/average
	}{{
		name: "above target scales up", hpa: cpuHPA(50, 1, 10, nil), replicas: 2, pods: pods,
		metrics:    &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 90, "b": 80})},
		wantWrites: []int32{4},
		wantConds:  []string{"AbleToScale=True/SucceededRescale", "ScalingActive=True/ValidMetricFound", "ScalingLimited=False/DesiredWithinRange"},
		wantEvents: []string{"Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target"},
		wantTarget: "85%/85m",
	}, {
		name: "within tolerance stays", hpa: cpuHPA(50, 1, 10, nil), replicas: 2, pods: pods,
		metrics:    &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 54, "b": 52})},
		wantConds:  []string{"AbleToScale=True/ReadyForNewScale", "ScalingActive=True/ValidMetricFound", "ScalingLimited=False/DesiredWithinRange"},
		wantTarget: "53%/53m",
	}, {
		name: "limited by maxReplicas", hpa: cpuHPA(10, 1, 3, nil), replicas: 2, pods: pods,
		metrics:    &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 90, "b": 90})},
		wantWrites: []int32{3},
		wantConds:  []string{"AbleToScale=True/SucceededRescale", "ScalingActive=True/ValidMetricFound", "ScalingLimited=True/TooManyReplicas"},
		wantEvents: []string{"Normal SuccessfulRescale New size: 3; reason: cpu resource utilization (percentage of request) above target"},
		wantTarget: "90%/90m",
	}, {
		name: "without behavior, scale-up is at most double", hpa: cpuHPA(10, 1, 100, nil), replicas: 2, pods: pods,
		metrics:    &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 100, "b": 100})},
		wantWrites: []int32{4},
		wantConds:  []string{"AbleToScale=True/SucceededRescale", "ScalingActive=True/ValidMetricFound", "ScalingLimited=True/ScaleUpLimit"},
		wantEvents: []string{"Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target"},
		wantTarget: "100%/100m",
	}, {
		name: "without behavior, the downscale window holds the initial count", hpa: cpuHPA(50, 1, 10, nil), replicas: 2, pods: pods,
		metrics:    &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 5, "b": 5})},
		wantConds:  []string{"AbleToScale=True/ScaleDownStabilized", "ScalingActive=True/ValidMetricFound", "ScalingLimited=False/DesiredWithinRange"},
		wantTarget: "5%/5m",
	}, {
		name: "below minReplicas is raised without reading metrics", hpa: cpuHPA(50, 3, 10, nil), replicas: 1, pods: pods,
		metrics:    &fakeMetrics{err: errors.New("unused")},
		wantWrites: []int32{3},
		wantConds:  []string{"AbleToScale=True/SucceededRescale"},
		wantEvents: []string{"Normal SuccessfulRescale New size: 3; reason: Current number of replicas below Spec.MinReplicas"},
	}, {
		name: "scaled to zero disables scaling", hpa: cpuHPA(50, 1, 10, nil), replicas: 0, pods: pods,
		metrics:   &fakeMetrics{err: errors.New("unused")},
		wantConds: []string{"AbleToScale=True/SucceededGetScale", "ScalingActive=False/ScalingDisabled"},
	}, {
		name: "no metrics", hpa: cpuHPA(50, 1, 10, nil), replicas: 2, pods: pods,
		metrics:   &fakeMetrics{err: errors.New("no metrics returned from resource metrics API")},
		wantConds: []string{"AbleToScale=True/SucceededGetScale", "ScalingActive=False/FailedGetResourceMetric"},
		wantEvents: []string{
			"Warning FailedGetResourceMetric failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API",
			"Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API",
		},
	}, {
		name: "missing request", hpa: cpuHPA(50, 1, 10, nil), replicas: 1, pods: []*corev1.Pod{func() *corev1.Pod {
			p := readyPod("a", 100)
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			return p
		}()},
		metrics:   &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 90})},
		wantConds: []string{"AbleToScale=True/SucceededGetScale", "ScalingActive=False/FailedGetResourceMetric"},
		wantEvents: []string{
			"Warning FailedGetResourceMetric failed to get cpu utilization: missing request for cpu in container main of Pod a",
			"Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization: missing request for cpu in container main of Pod a",
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.hpa, tc.replicas, tc.pods, tc.metrics)
			hpa := h.sync(t)
			if fmt.Sprint(h.writes) != fmt.Sprint(tc.wantWrites) {
				t.Errorf("scale writes %v, want %v", h.writes, tc.wantWrites)
			}
			if got := conditions(hpa); fmt.Sprint(got) != fmt.Sprint(tc.wantConds) {
				t.Errorf("conditions\n got %v\nwant %v", got, tc.wantConds)
			}
			if got := h.events(); fmt.Sprint(got) != fmt.Sprint(tc.wantEvents) {
				t.Errorf("events\n got %q\nwant %q", got, tc.wantEvents)
			}
			if tc.wantTarget != "" {
				if len(hpa.Status.CurrentMetrics) != 1 || hpa.Status.CurrentMetrics[0].Resource == nil {
					t.Fatalf("currentMetrics %+v", hpa.Status.CurrentMetrics)
				}
				cur := hpa.Status.CurrentMetrics[0].Resource.Current
				if got := fmt.Sprintf("%d%%/%s", *cur.AverageUtilization, cur.AverageValue.String()); got != tc.wantTarget {
					t.Errorf("current metric %s, want %s", got, tc.wantTarget)
				}
			}
			if hpa.Status.CurrentReplicas != tc.replicas {
				t.Errorf("status.currentReplicas %d, want %d", hpa.Status.CurrentReplicas, tc.replicas)
			}
			if len(tc.wantWrites) > 0 {
				if hpa.Status.DesiredReplicas != tc.wantWrites[0] || hpa.Status.LastScaleTime == nil {
					t.Errorf("status desired %d lastScaleTime %v", hpa.Status.DesiredReplicas, hpa.Status.LastScaleTime)
				}
			} else if hpa.Status.LastScaleTime != nil {
				t.Errorf("lastScaleTime set without a rescale")
			}
		})
	}
}

// TestReconcileContainerResource scales on one container's usage against that
// container's request (autoscaling/v2 ContainerResource) and reports it per container.
func TestReconcileContainerResource(t *testing.T) {
	hpa := cpuHPA(50, 1, 10, nil)
	target := int32(50)
	hpa.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ContainerResourceMetricSourceType,
		ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Container: "main",
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}}
	m := &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 90, "b": 80})}
	h := newHarness(t, hpa, 2, []*corev1.Pod{readyPod("a", 100), readyPod("b", 100)}, m)
	got := h.sync(t)
	if fmt.Sprint(h.writes) != "[4]" {
		t.Errorf("scale writes %v, want [4]", h.writes)
	}
	if fmt.Sprint(m.containers) != "[main]" {
		t.Errorf("metrics asked for containers %q, want [main]", m.containers)
	}
	if len(got.Status.CurrentMetrics) != 1 || got.Status.CurrentMetrics[0].ContainerResource == nil {
		t.Fatalf("currentMetrics %+v", got.Status.CurrentMetrics)
	}
	cur := got.Status.CurrentMetrics[0].ContainerResource
	if cur.Container != "main" || cur.Current.AverageUtilization == nil || *cur.Current.AverageUtilization != 85 {
		t.Errorf("current container metric %+v, want main at 85%%", cur)
	}
	want := "Normal SuccessfulRescale New size: 4; reason: cpu container resource utilization (percentage of request) above target"
	if ev := h.events(); len(ev) != 1 || ev[0] != want {
		t.Errorf("events %q, want %q", ev, want)
	}
}

func TestReconcileUnknownKind(t *testing.T) {
	hpa := cpuHPA(50, 1, 10, nil)
	hpa.Spec.ScaleTargetRef.Kind = "Flunder"
	h := newHarness(t, hpa, 2, nil, &fakeMetrics{})
	got := h.sync(t)
	if c := conditions(got); fmt.Sprint(c) != "[AbleToScale=False/FailedGetScale]" {
		t.Errorf("conditions %v", c)
	}
	if ev := h.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning FailedGetScale no matches for") {
		t.Errorf("events %q", ev)
	}
	if len(h.writes) != 0 {
		t.Errorf("scale writes %v", h.writes)
	}
}

// TestBehaviorStory follows one HPA with behavior through load and quiet: scale-up
// limited by a Pods policy per period, then a scale-down held by the stabilization
// window and then paced by a Percent policy.
func TestBehaviorStory(t *testing.T) {
	window := int32(60)
	behavior := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(0)), SelectPolicy: ptr(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}}},
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window, SelectPolicy: ptr(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 30}}},
	}
	var pods []*corev1.Pod
	for i := range 10 {
		pods = append(pods, readyPod(fmt.Sprintf("p%d", i), 100))
	}
	load := func(n int, v int64) PodMetrics {
		m := map[string]int64{}
		for i := range n {
			m[fmt.Sprintf("p%d", i)] = v
		}
		return cpuSamples(m)
	}
	h := newHarness(t, cpuHPA(50, 1, 10, behavior), 1, pods[:1], &fakeMetrics{})
	steps := []struct {
		after   time.Duration
		pods    int // how many pods are observed (the first n)
		usage   int64
		want    int32
		limited string
	}{
		{0, 1, 300, 3, "ScalingLimited=True/ScaleUpLimit"},                // wants 6, +2 pods per 60s
		{15 * time.Second, 3, 300, 3, "ScalingLimited=True/ScaleUpLimit"}, // period used up
		{50 * time.Second, 3, 300, 5, "ScalingLimited=True/ScaleUpLimit"}, // a new period: 3 -> 5
		// Quiet, but the window still holds the last recommendation (18), so the
		// count stays where the scale-up rate let it.
		{15 * time.Second, 5, 10, 5, "ScalingLimited=True/ScaleUpLimit"},
		{65 * time.Second, 5, 10, 2, "ScalingLimited=True/ScaleDownLimit"}, // 50% of 5 per 30s: 2 (2.5 rounded down)
		{31 * time.Second, 2, 10, 1, "ScalingLimited=False/DesiredWithinRange"},
	}
	for i, s := range steps {
		h.clock.Step(s.after)
		h.metrics.resource = load(s.pods, s.usage)
		setPods(t, h, pods[:s.pods])
		hpa := h.sync(t)
		if h.replicas != s.want {
			t.Fatalf("step %d: replicas %d, want %d (conditions %v)", i, h.replicas, s.want, conditions(hpa))
		}
		found := false
		for _, c := range conditions(hpa) {
			found = found || c == s.limited
		}
		if !found {
			t.Errorf("step %d: conditions %v, want %s", i, conditions(hpa), s.limited)
		}
	}
}

// TestSelectPolicyDisabled: a Disabled scale-down never lowers the count.
func TestSelectPolicyDisabled(t *testing.T) {
	behavior := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(0)), Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}},
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(0)), SelectPolicy: ptr(autoscalingv2.DisabledPolicySelect)},
	}
	pods := []*corev1.Pod{readyPod("a", 100), readyPod("b", 100), readyPod("c", 100)}
	h := newHarness(t, cpuHPA(50, 1, 10, behavior), 3, pods, &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 1, "b": 1, "c": 1})})
	hpa := h.sync(t)
	if len(h.writes) != 0 {
		t.Errorf("scale writes %v", h.writes)
	}
	want := "ScalingLimited=True/ScaleDownLimit"
	if c := conditions(hpa); !strings.Contains(fmt.Sprint(c), want) {
		t.Errorf("conditions %v, want %s", c, want)
	}
}

func setPods(t *testing.T, h *harness, pods []*corev1.Pod) {
	t.Helper()
	idx := informers.NewSharedInformerFactory(h.client, 0).Core().V1().Pods()
	for _, p := range pods {
		if err := idx.Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	h.c.pods = idx.Lister()
}

func ptr[T any](v T) *T { return &v }

// TestReconcileOtherMetricTypes: Pods, Object and External metrics, each scaling a
// Deployment of two ready pods, with the status and rescale reason upstream gives them.
func TestReconcileOtherMetricTypes(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	pods := []*corev1.Pod{readyPod("a", 100), readyPod("b", 100)}
	cases := []struct {
		name       string
		metric     autoscalingv2.MetricSpec
		metrics    *fakeMetrics
		want       int32
		wantReason string
		check      func(autoscalingv2.MetricStatus) string
	}{{
		name: "pods metric average value",
		metric: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")}}},
		metrics:    &fakeMetrics{resource: cpuSamples(map[string]int64{"a": 30000, "b": 10000})},
		want:       4,
		wantReason: "pods metric qps above target",
		check:      func(s autoscalingv2.MetricStatus) string { return s.Pods.Current.AverageValue.String() },
	}, {
		name: "object metric value",
		metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"},
			Metric:          autoscalingv2.MetricIdentifier{Name: "requests"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("100")}}},
		metrics:    &fakeMetrics{object: 300000},
		want:       4, // wants 6; at most double without behavior
		wantReason: "Service metric requests above target",
		check:      func(s autoscalingv2.MetricStatus) string { return s.Object.Current.Value.String() },
	}, {
		name: "external metric average value",
		metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("5")}}},
		metrics:    &fakeMetrics{external: []int64{10000, 5000}},
		want:       3,
		wantReason: "external metric queue(nil) above target",
		check:      func(s autoscalingv2.MetricStatus) string { return s.External.Current.AverageValue.String() },
	}}
	wantCurrent := []string{"20", "300", "7500m"}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hpa := cpuHPA(50, 1, 10, nil)
			hpa.Spec.Metrics = []autoscalingv2.MetricSpec{tc.metric}
			h := newHarness(t, hpa, 2, pods, tc.metrics)
			got := h.sync(t)
			if h.replicas != tc.want {
				t.Errorf("replicas %d, want %d; conditions %v", h.replicas, tc.want, conditions(got))
			}
			if ev := h.events(); len(ev) != 1 || ev[0] != fmt.Sprintf("Normal SuccessfulRescale New size: %d; reason: %s", tc.want, tc.wantReason) {
				t.Errorf("events %q", ev)
			}
			if len(got.Status.CurrentMetrics) != 1 || got.Status.CurrentMetrics[0].Type != tc.metric.Type {
				t.Fatalf("currentMetrics %+v", got.Status.CurrentMetrics)
			}
			if cur := tc.check(got.Status.CurrentMetrics[0]); cur != wantCurrent[i] {
				t.Errorf("current %s, want %s", cur, wantCurrent[i])
			}
		})
	}
}
