package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// computeReplicasForMetrics proposes a replica count for each metric and takes the
// largest. It returns -1 with an error when no metric gave one, or when some failed
// and the rest would scale down (a metric that cannot be read might be the one that
// needs more pods).
func (c *Controller) computeReplicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler,
	sc *autoscalingv1.Scale, now time.Time) (int32, string, []autoscalingv2.MetricStatus, error) {
	if sc.Status.Selector == "" {
		msg := "selector is required"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector", nil, now)
		return -1, "", nil, errors.New(msg)
	}
	selector, err := labels.Parse(sc.Status.Selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", msg, nil, now)
		return -1, "", nil, errors.New(msg)
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var (
		replicas      int32
		metricName    string
		invalid       int
		firstErr      error
		firstCondType = autoscalingv2.ScalingActive
		firstCond     *condition
	)
	calc := c.calc.forHPA(hpa)
	for i := range specs {
		proposal, name, status, cond, err := c.computeReplicasForMetric(ctx, calc, hpa, specs[i], sc, selector)
		if err != nil {
			if invalid == 0 {
				firstErr, firstCond = err, cond
			}
			invalid++
			continue
		}
		statuses[i] = status
		if replicas == 0 || proposal > replicas {
			replicas, metricName = proposal, name
		}
	}
	if invalid >= len(specs) || (invalid > 0 && replicas < sc.Spec.Replicas) {
		if firstCond != nil {
			setCondition(hpa, firstCondType, corev1.ConditionFalse, firstCond.reason, firstCond.message, nil, now)
		}
		return -1, "", statuses, fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %v", invalid, len(specs), firstErr)
	}
	setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", metricName, now)
	return replicas, metricName, statuses, nil
}

// condition is the ScalingActive=False reason and message for a metric that failed.
type condition struct{ reason, message string }

// unable records the Warning event for a metric that failed and returns its condition.
func (c *Controller) unable(hpa *autoscalingv2.HorizontalPodAutoscaler, reason string, err error) *condition {
	c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
	return &condition{reason, fmt.Sprintf("the HPA was unable to compute the replica count: %v", err)}
}

// computeReplicasForMetric proposes a replica count for one metric, with the name the
// rescale event gives it and its status.
func (c *Controller) computeReplicasForMetric(ctx context.Context, calc *calculator, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec,
	sc *autoscalingv1.Scale, selector labels.Selector) (int32, string, autoscalingv2.MetricStatus, *condition, error) {
	specReplicas, statusReplicas := sc.Spec.Replicas, sc.Status.Replicas
	fail := func(reason string, err error) (int32, string, autoscalingv2.MetricStatus, *condition, error) {
		return 0, "", autoscalingv2.MetricStatus{}, c.unable(hpa, reason, err), err
	}
	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil {
			break
		}
		metricSelector, err := metav1.LabelSelectorAsSelector(spec.Object.Metric.Selector)
		if err != nil {
			return fail("FailedGetObjectMetric", err)
		}
		name := fmt.Sprintf("%s metric %s", spec.Object.DescribedObject.Kind, spec.Object.Metric.Name)
		status := autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: spec.Object.DescribedObject, Metric: spec.Object.Metric}}
		usage, _, err := c.metrics.ObjectMetric(ctx, spec.Object.Metric.Name, hpa.Namespace, &spec.Object.DescribedObject, metricSelector)
		if err != nil {
			return fail("FailedGetObjectMetric", fmt.Errorf("unable to get metric %s: %s on %s/%s: %v",
				spec.Object.Metric.Name, spec.Object.DescribedObject.Kind, hpa.Namespace, spec.Object.DescribedObject.Name, err))
		}
		switch {
		case spec.Object.Target.Type == autoscalingv2.ValueMetricType && spec.Object.Target.Value != nil:
			ratio := float64(usage) / float64(spec.Object.Target.Value.MilliValue())
			replicas, err := calc.ratioReplicas(specReplicas, ratio, func() ([]*corev1.Pod, error) {
				return c.pods.Pods(hpa.Namespace).List(selector)
			})
			if err != nil {
				return fail("FailedGetObjectMetric", err)
			}
			status.Object.Current = autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(usage, resource.DecimalSI)}
			return replicas, name, status, nil, nil
		case spec.Object.Target.Type == autoscalingv2.AverageValueMetricType && spec.Object.Target.AverageValue != nil:
			replicas, perPod := calc.perPodReplicas(statusReplicas, usage, spec.Object.Target.AverageValue.MilliValue())
			status.Object.Current = autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(perPod, resource.DecimalSI)}
			return replicas, name, status, nil, nil
		}
		return fail("FailedGetObjectMetric", errors.New("invalid object metric source: neither a value target nor an average value target was set"))

	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil || spec.Pods.Target.AverageValue == nil {
			break
		}
		metricSelector, err := metav1.LabelSelectorAsSelector(spec.Pods.Metric.Selector)
		if err != nil {
			return fail("FailedGetPodsMetric", err)
		}
		metrics, _, err := c.metrics.PodsMetric(ctx, spec.Pods.Metric.Name, hpa.Namespace, selector, metricSelector)
		if err != nil {
			return fail("FailedGetPodsMetric", fmt.Errorf("unable to get metric %s: %v", spec.Pods.Metric.Name, err))
		}
		pods, err := c.pods.Pods(hpa.Namespace).List(selector)
		if err != nil {
			return fail("FailedGetPodsMetric", fmt.Errorf("unable to get pods while calculating replica count: %v", err))
		}
		replicas, avg, err := calc.plainReplicas(specReplicas, spec.Pods.Target.AverageValue.MilliValue(), "", pods, metrics)
		if err != nil {
			return fail("FailedGetPodsMetric", err)
		}
		return replicas, fmt.Sprintf("pods metric %s", spec.Pods.Metric.Name), autoscalingv2.MetricStatus{
			Type: autoscalingv2.PodsMetricSourceType,
			Pods: &autoscalingv2.PodsMetricStatus{Metric: spec.Pods.Metric,
				Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)}},
		}, nil, nil

	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			break
		}
		replicas, name, current, err := c.resourceReplicas(ctx, calc, hpa.Namespace, spec.Resource.Name, "", spec.Resource.Target, specReplicas, selector)
		if err != nil {
			return fail("FailedGetResourceMetric", err)
		}
		return replicas, name, autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: current}}, nil, nil

	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			break
		}
		cr := spec.ContainerResource
		replicas, name, current, err := c.resourceReplicas(ctx, calc, hpa.Namespace, cr.Name, cr.Container, cr.Target, specReplicas, selector)
		if err != nil {
			return fail("FailedGetContainerResourceMetric", err)
		}
		return replicas, name, autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType,
			ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: cr.Name, Container: cr.Container, Current: current}}, nil, nil

	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil {
			break
		}
		ext := spec.External
		metricSelector, err := metav1.LabelSelectorAsSelector(ext.Metric.Selector)
		if err != nil {
			return fail("FailedGetExternalMetric", err)
		}
		values, _, err := c.metrics.ExternalMetric(ctx, ext.Metric.Name, hpa.Namespace, metricSelector)
		if err != nil {
			return fail("FailedGetExternalMetric", fmt.Errorf("unable to get external metric %s/%s/%+v: %s", hpa.Namespace, ext.Metric.Name, ext.Metric.Selector, err))
		}
		var usage int64
		for _, v := range values {
			usage += v
		}
		name := fmt.Sprintf("external metric %s(%+v)", ext.Metric.Name, ext.Metric.Selector)
		status := autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{Metric: ext.Metric}}
		switch {
		case ext.Target.AverageValue != nil:
			replicas, perPod := calc.perPodReplicas(statusReplicas, usage, ext.Target.AverageValue.MilliValue())
			status.External.Current = autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(perPod, resource.DecimalSI)}
			return replicas, name, status, nil, nil
		case ext.Target.Value != nil:
			replicas, err := calc.ratioReplicas(specReplicas, float64(usage)/float64(ext.Target.Value.MilliValue()), func() ([]*corev1.Pod, error) {
				return c.pods.Pods(hpa.Namespace).List(selector)
			})
			if err != nil {
				return fail("FailedGetExternalMetric", err)
			}
			status.External.Current = autoscalingv2.MetricValueStatus{Value: resource.NewMilliQuantity(usage, resource.DecimalSI)}
			return replicas, name, status, nil, nil
		}
		return fail("FailedGetExternalMetric", errors.New("invalid external metric source: neither a value target nor an average value target was set"))
	}
	return fail("InvalidMetricSourceType", fmt.Errorf("unknown metric source type %q", string(spec.Type)))
}

// resourceReplicas handles Resource and ContainerResource metrics: Utilization
// targets against the pods' requests, AverageValue targets against raw usage.
func (c *Controller) resourceReplicas(ctx context.Context, calc *calculator, ns string, res corev1.ResourceName, container string,
	target autoscalingv2.MetricTarget, specReplicas int32, selector labels.Selector) (int32, string, autoscalingv2.MetricValueStatus, error) {
	kind := "resource"
	if container != "" {
		kind = "container resource"
	}
	list := func() (PodMetrics, []*corev1.Pod, error) {
		metrics, _, err := c.metrics.ResourceMetric(ctx, res, ns, selector, container)
		if err != nil {
			return nil, nil, fmt.Errorf("unable to get metrics for resource %s: %v", res, err)
		}
		pods, err := c.pods.Pods(ns).List(selector)
		if err != nil {
			return nil, nil, fmt.Errorf("unable to get pods while calculating replica count: %v", err)
		}
		return metrics, pods, nil
	}
	switch {
	case target.AverageValue != nil:
		metrics, pods, err := list()
		var replicas int32
		var avg int64
		if err == nil {
			replicas, avg, err = calc.plainReplicas(specReplicas, target.AverageValue.MilliValue(), res, pods, metrics)
		}
		if err != nil {
			return 0, "", autoscalingv2.MetricValueStatus{}, fmt.Errorf("failed to get %s usage: %v", res, err)
		}
		return replicas, fmt.Sprintf("%s %s", res, kind), autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)}, nil
	case target.AverageUtilization != nil:
		metrics, pods, err := list()
		var replicas, utilization int32
		var raw int64
		if err == nil {
			replicas, utilization, raw, err = calc.resourceReplicas(specReplicas, *target.AverageUtilization, res, container, pods, metrics)
		}
		if err != nil {
			return 0, "", autoscalingv2.MetricValueStatus{}, fmt.Errorf("failed to get %s utilization: %v", res, err)
		}
		return replicas, fmt.Sprintf("%s %s utilization (percentage of request)", res, kind), autoscalingv2.MetricValueStatus{
			AverageUtilization: &utilization, AverageValue: resource.NewMilliQuantity(raw, resource.DecimalSI)}, nil
	}
	return 0, "", autoscalingv2.MetricValueStatus{}, errors.New("invalid resource metric source: neither an average utilization target nor an average value target was set")
}
