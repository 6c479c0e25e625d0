package podautoscaler

import (
	"context"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// MetricsClient reads the metrics an HPA targets. Values are in milli-units.
type MetricsClient interface {
	// ResourceMetric is the usage of resource by each pod matching selector (of one
	// container when container is set), from metrics.k8s.io.
	ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetrics, time.Time, error)
	// PodsMetric is a custom metric of each pod matching selector.
	PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (PodMetrics, time.Time, error)
	// ObjectMetric is a custom metric describing one object.
	ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error)
	// ExternalMetric is the values of an external metric.
	ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error)
}

// defaultMetricWindow is the window assumed for a custom metric that states none.
const defaultMetricWindow = time.Minute

// apiMetrics reads the three metrics APIs through the apiserver's aggregation.
type apiMetrics struct {
	resource resourceclient.PodMetricsesGetter
	custom   custom_metrics.CustomMetricsClient
	external external_metrics.ExternalMetricsClient
}

// NewMetricsClient reads metrics.k8s.io, custom.metrics.k8s.io and
// external.metrics.k8s.io with the given clients.
func NewMetricsClient(resource resourceclient.PodMetricsesGetter, custom custom_metrics.CustomMetricsClient, external external_metrics.ExternalMetricsClient) MetricsClient {
	return &apiMetrics{resource: resource, custom: custom, external: external}
}

func (m *apiMetrics) ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetrics, time.Time, error) {
	list, err := m.resource.PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %v", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from resource metrics API")
	}
	out := make(PodMetrics, len(list.Items))
	for _, pm := range list.Items {
		var sum int64
		found, complete := false, true
		for _, c := range pm.Containers {
			if container != "" && c.Name != container {
				continue
			}
			q, ok := c.Usage[resource]
			if !ok {
				complete = false
				break
			}
			sum += q.MilliValue()
			found = true
		}
		if found && complete {
			out[pm.Name] = PodMetric{Timestamp: pm.Timestamp.Time, Window: pm.Window.Duration, Value: sum}
		}
	}
	if container != "" && len(out) == 0 {
		return nil, time.Time{}, fmt.Errorf("failed to get container metrics: container %s not present in metrics", container)
	}
	return out, oldest(out), nil
}

func (m *apiMetrics) PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (PodMetrics, time.Time, error) {
	list, err := m.custom.NamespacedMetrics(namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, selector, metricName, metricSelector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %v", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from custom metrics API")
	}
	out := make(PodMetrics, len(list.Items))
	for _, v := range list.Items {
		window := defaultMetricWindow
		if v.WindowSeconds != nil {
			window = time.Duration(*v.WindowSeconds) * time.Second
		}
		out[v.DescribedObject.Name] = PodMetric{Timestamp: v.Timestamp.Time, Window: window, Value: v.Value.MilliValue()}
	}
	return out, oldest(out), nil
}

func (m *apiMetrics) ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return 0, time.Time{}, err
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	var metrics custom_metrics.MetricsInterface
	name := ref.Name
	if gk.Kind == "Namespace" && gk.Group == "" {
		// A namespace's own metric is asked of the root scope.
		metrics, name = m.custom.RootScopedMetrics(), namespace
	} else {
		metrics = m.custom.NamespacedMetrics(namespace)
	}
	v, err := metrics.GetForObject(gk, name, metricName, metricSelector)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %v", err)
	}
	return v.Value.MilliValue(), v.Timestamp.Time, nil
}

func (m *apiMetrics) ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	list, err := m.external.NamespacedMetrics(namespace).List(metricName, selector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from external metrics API: %v", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from external metrics API")
	}
	out := make([]int64, 0, len(list.Items))
	var ts time.Time
	for _, v := range list.Items {
		out = append(out, v.Value.MilliValue())
		ts = v.Timestamp.Time
	}
	return out, ts, nil
}

// oldest is the earliest sample time, the one the HPA reports for a set.
func oldest(m PodMetrics) time.Time {
	var t time.Time
	for _, s := range m {
		if t.IsZero() || s.Timestamp.Before(t) {
			t = s.Timestamp
		}
	}
	return t
}
