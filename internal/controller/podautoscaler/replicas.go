package podautoscaler

import (
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// PodMetric is one pod's sample: its value in milli-units, when it was taken and over
// what window (a CPU rate is measured over one).
type PodMetric struct {
	Timestamp time.Time
	Window    time.Duration
	Value     int64
}

// PodMetrics are the samples by pod name.
type PodMetrics map[string]PodMetric

// tolerances is how far the usage ratio may stray from 1 before the HPA acts: within
// [1-down, 1+up] the replica count stays.
type tolerances struct{ down, up float64 }

func (t tolerances) within(ratio float64) bool {
	return 1.0-t.down <= ratio && ratio <= 1.0+t.up
}

// calculator turns observed pods and their metrics into a replica count, with
// upstream's rules for pods that are missing metrics, not ready, or still starting.
type calculator struct {
	tolerance tolerances
	// cpuInitializationPeriod: within it after a pod starts, a CPU sample taken
	// before the pod became ready is ignored (--horizontal-pod-autoscaler-cpu-initialization-period).
	cpuInitializationPeriod time.Duration
	// delayOfInitialReadinessStatus: after the initialization period, an unready pod
	// whose readiness last changed this soon after it started is still considered
	// starting (--horizontal-pod-autoscaler-initial-readiness-delay).
	delayOfInitialReadinessStatus time.Duration
	now                           func() time.Time
}

// forHPA is the calculator with the HPA's own tolerances, where its behavior sets
// them (behavior.scaleUp/scaleDown.tolerance).
func (c *calculator) forHPA(hpa *autoscalingv2.HorizontalPodAutoscaler) *calculator {
	out := *c
	if b := hpa.Spec.Behavior; b != nil {
		if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
			out.tolerance.up = b.ScaleUp.Tolerance.AsApproximateFloat64()
		}
		if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
			out.tolerance.down = b.ScaleDown.Tolerance.AsApproximateFloat64()
		}
	}
	return &out
}

// groupPods sorts pods by how their samples count: ready ones, unready ones (pending,
// or for CPU still initializing), ones with no sample, and ones to ignore (deleted or
// failed).
func (c *calculator) groupPods(pods []*corev1.Pod, metrics PodMetrics, resource corev1.ResourceName) (ready int, unready, missing, ignored sets.Set[string]) {
	unready, missing, ignored = sets.New[string](), sets.New[string](), sets.New[string]()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			ignored.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			unready.Insert(pod.Name)
			continue
		}
		metric, found := metrics[pod.Name]
		if !found {
			missing.Insert(pod.Name)
			continue
		}
		if resource == corev1.ResourceCPU && c.cpuUnready(pod, metric) {
			unready.Insert(pod.Name)
			continue
		}
		ready++
	}
	return ready, unready, missing, ignored
}

// cpuUnready tells whether a pod's CPU sample cannot be trusted yet: a starting pod
// burns CPU that says nothing about load.
func (c *calculator) cpuUnready(pod *corev1.Pod, metric PodMetric) bool {
	var cond *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			cond = &pod.Status.Conditions[i]
		}
	}
	if cond == nil || pod.Status.StartTime == nil {
		return true
	}
	start := pod.Status.StartTime.Time
	if start.Add(c.cpuInitializationPeriod).After(c.now()) {
		// Unready, or ready but the sample covers time from before it became ready.
		return cond.Status == corev1.ConditionFalse || metric.Timestamp.Before(cond.LastTransitionTime.Add(metric.Window))
	}
	// Unready and it has been so since shortly after it started.
	return cond.Status == corev1.ConditionFalse && start.Add(c.delayOfInitialReadinessStatus).After(cond.LastTransitionTime.Time)
}

// podRequests sums each pod's request of resource (of one container when container is
// set); a pod-level request, where set, stands for the whole pod.
func podRequests(pods []*corev1.Pod, container string, resource corev1.ResourceName) (map[string]int64, error) {
	requests := make(map[string]int64, len(pods))
	for _, pod := range pods {
		if container == "" && pod.Spec.Resources != nil {
			if q, ok := pod.Spec.Resources.Requests[resource]; ok {
				requests[pod.Name] = q.MilliValue()
				continue
			}
		}
		var sum int64
		for _, c := range pod.Spec.Containers {
			if container != "" && c.Name != container {
				continue
			}
			q, ok := c.Resources.Requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, c.Name, pod.Name)
			}
			sum += q.MilliValue()
		}
		requests[pod.Name] = sum
	}
	return requests, nil
}

// utilizationRatio is the usage of the pods that have requests as a percentage of
// their requests, over the target; also that percentage and the average raw usage.
func utilizationRatio(metrics PodMetrics, requests map[string]int64, target int32) (ratio float64, utilization int32, rawAverage int64, err error) {
	var usage, requested int64
	n := 0
	for pod, m := range metrics {
		r, ok := requests[pod]
		if !ok {
			continue
		}
		usage += m.Value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, 0, 0, fmt.Errorf("no metrics returned matched known pods")
	}
	utilization = int32(usage * 100 / requested)
	return float64(utilization) / float64(target), utilization, usage / int64(n), nil
}

// usageRatio is the average of metrics over target.
func usageRatio(metrics PodMetrics, target int64) (float64, int64) {
	var sum int64
	for _, m := range metrics {
		sum += m.Value
	}
	avg := sum / int64(len(metrics))
	return float64(avg) / float64(target), avg
}

// resourceReplicas is the replica count for a Utilization target on resource
// (upstream's GetResourceReplicas): the usage ratio over ready pods, then, if pods
// lack samples or are not ready, the ratio again with those pods assumed idle (when
// scaling up) or at their request (when scaling down); a move that this reverses
// does not happen.
func (c *calculator) resourceReplicas(current, target int32, resource corev1.ResourceName, container string,
	pods []*corev1.Pod, metrics PodMetrics) (replicas, utilization int32, rawAverage int64, err error) {
	if len(pods) == 0 {
		return 0, 0, 0, fmt.Errorf("no pods returned by selector while calculating replica count")
	}
	metrics = copyMetrics(metrics)
	ready, unready, missing, ignored := c.groupPods(pods, metrics, resource)
	removeMetrics(metrics, ignored)
	removeMetrics(metrics, unready)
	if len(metrics) == 0 {
		return 0, 0, 0, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := podRequests(pods, container, resource)
	if err != nil {
		return 0, 0, 0, err
	}
	ratio, utilization, rawAverage, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, err
	}
	scaleUpWithUnready := len(unready) > 0 && ratio > 1.0
	if !scaleUpWithUnready && len(missing) == 0 {
		if c.tolerance.within(ratio) {
			return current, utilization, rawAverage, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), utilization, rawAverage, nil
	}
	if len(missing) > 0 {
		if ratio < 1.0 {
			// Scaling down: assume the silent pods use their request (or the target,
			// if higher), so they make the move smaller.
			fallback := int64(max(100, target))
			for pod := range missing {
				metrics[pod] = PodMetric{Value: requests[pod] * fallback / 100}
			}
		} else if ratio > 1.0 {
			for pod := range missing {
				metrics[pod] = PodMetric{Value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		for pod := range unready {
			metrics[pod] = PodMetric{Value: 0}
		}
	}
	newRatio, _, _, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, err
	}
	if c.tolerance.within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return current, utilization, rawAverage, nil
	}
	replicas = int32(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1.0 && replicas > current) || (newRatio > 1.0 && replicas < current) {
		return current, utilization, rawAverage, nil
	}
	return replicas, utilization, rawAverage, nil
}

// plainReplicas is the replica count for an AverageValue target over per-pod samples
// (resource AverageValue and Pods metrics), with the same rules for missing and
// unready pods as resourceReplicas; resource is empty for non-resource metrics, which
// skip the CPU readiness rules.
func (c *calculator) plainReplicas(current int32, target int64, resource corev1.ResourceName,
	pods []*corev1.Pod, metrics PodMetrics) (replicas int32, average int64, err error) {
	if len(pods) == 0 {
		return 0, 0, fmt.Errorf("no pods returned by selector while calculating replica count")
	}
	metrics = copyMetrics(metrics)
	ready, unready, missing, ignored := c.groupPods(pods, metrics, resource)
	removeMetrics(metrics, ignored)
	removeMetrics(metrics, unready)
	if len(metrics) == 0 {
		return 0, 0, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, average := usageRatio(metrics, target)
	scaleUpWithUnready := len(unready) > 0 && ratio > 1.0
	if !scaleUpWithUnready && len(missing) == 0 {
		if c.tolerance.within(ratio) {
			return current, average, nil
		}
		return int32(math.Ceil(ratio * float64(ready))), average, nil
	}
	if len(missing) > 0 {
		if ratio < 1.0 {
			for pod := range missing {
				metrics[pod] = PodMetric{Value: target}
			}
		} else {
			for pod := range missing {
				metrics[pod] = PodMetric{Value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		for pod := range unready {
			metrics[pod] = PodMetric{Value: 0}
		}
	}
	newRatio, _ := usageRatio(metrics, target)
	if c.tolerance.within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return current, average, nil
	}
	replicas = int32(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1.0 && replicas > current) || (newRatio > 1.0 && replicas < current) {
		return current, average, nil
	}
	return replicas, average, nil
}

// readyPodCount counts running pods whose Ready condition is True.
func readyPodCount(pods []*corev1.Pod) (int, error) {
	if len(pods) == 0 {
		return 0, fmt.Errorf("no pods returned by selector while calculating replica count")
	}
	n := 0
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// ratioReplicas scales the ready pods by a usage ratio of one whole-target metric
// (Object and External Value targets); with no replicas it scales from one.
func (c *calculator) ratioReplicas(current int32, ratio float64, pods func() ([]*corev1.Pod, error)) (int32, error) {
	if current == 0 {
		return int32(math.Ceil(ratio)), nil
	}
	if c.tolerance.within(ratio) {
		return current, nil
	}
	list, err := pods()
	if err != nil {
		return 0, fmt.Errorf("unable to calculate ready pods: %v", err)
	}
	ready, err := readyPodCount(list)
	if err != nil {
		return 0, fmt.Errorf("unable to calculate ready pods: %v", err)
	}
	return int32(math.Ceil(ratio * float64(ready))), nil
}

// perPodReplicas is the replica count for an AverageValue target on one total (Object
// and External AverageValue targets): the total over the target per pod, unless
// within tolerance of the current count; also the total per current replica.
func (c *calculator) perPodReplicas(statusReplicas int32, total, targetPerPod int64) (int32, int64) {
	replicas := statusReplicas
	ratio := float64(total) / (float64(targetPerPod) * float64(statusReplicas))
	if !c.tolerance.within(ratio) {
		replicas = int32(math.Ceil(float64(total) / float64(targetPerPod)))
	}
	perPod := total
	if statusReplicas > 0 {
		perPod = int64(math.Ceil(float64(total) / float64(statusReplicas)))
	}
	return replicas, perPod
}

func copyMetrics(m PodMetrics) PodMetrics {
	out := make(PodMetrics, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func removeMetrics(m PodMetrics, pods sets.Set[string]) {
	for pod := range pods {
		delete(m, pod)
	}
}
