package autoscaling

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
)

func hpaPrinter() *registry.Printer {
	spec, status := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc(), autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()
	return &registry.Printer{
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Reference", Type: "string", Description: spec["scaleTargetRef"]},
			{Name: "Targets", Type: "string", Description: spec["metrics"]},
			{Name: "MinPods", Type: "string", Description: spec["minReplicas"]},
			{Name: "MaxPods", Type: "string", Description: spec["maxReplicas"]},
			{Name: "Replicas", Type: "string", Description: status["currentReplicas"]},
			registry.AgeColumn,
		},
		Row: func(obj runtime.Object) []interface{} {
			hpa, err := asV2(obj)
			if err != nil {
				return []interface{}{"", "", "", "", int64(0), int64(0), ""}
			}
			minPods := "<unset>"
			if hpa.Spec.MinReplicas != nil {
				minPods = fmt.Sprintf("%d", *hpa.Spec.MinReplicas)
			}
			ref := hpa.Spec.ScaleTargetRef
			return []interface{}{hpa.Name, ref.Kind + "/" + ref.Name, formatMetrics(hpa.Spec.Metrics, hpa.Status.CurrentMetrics),
				minPods, int64(hpa.Spec.MaxReplicas), int64(hpa.Status.CurrentReplicas), registry.Age(hpa.CreationTimestamp)}
		},
	}
}

// formatMetrics is the TARGETS cell: "current/target" per metric, two at most.
func formatMetrics(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const shown = 2
	var list []string
	quantity := func(q *resource.Quantity) string {
		if q == nil {
			return "<nil>"
		}
		return q.String()
	}
	for i, spec := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		current := "<unknown>"
		switch spec.Type {
		case autoscalingv2.ExternalMetricSourceType:
			if spec.External.Target.AverageValue != nil {
				if st != nil && st.External != nil && st.External.Current.AverageValue != nil {
					current = st.External.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s/%s (avg)", current, spec.External.Target.AverageValue.String()))
			} else {
				if st != nil && st.External != nil {
					current = quantity(st.External.Current.Value)
				}
				list = append(list, fmt.Sprintf("%s/%s", current, quantity(spec.External.Target.Value)))
			}
		case autoscalingv2.PodsMetricSourceType:
			if st != nil && st.Pods != nil {
				current = quantity(st.Pods.Current.AverageValue)
			}
			list = append(list, fmt.Sprintf("%s/%s", current, quantity(spec.Pods.Target.AverageValue)))
		case autoscalingv2.ObjectMetricSourceType:
			if spec.Object.Target.AverageValue != nil {
				if st != nil && st.Object != nil && st.Object.Current.AverageValue != nil {
					current = st.Object.Current.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s/%s (avg)", current, spec.Object.Target.AverageValue.String()))
			} else {
				if st != nil && st.Object != nil {
					current = quantity(st.Object.Current.Value)
				}
				list = append(list, fmt.Sprintf("%s/%s", current, quantity(spec.Object.Target.Value)))
			}
		case autoscalingv2.ResourceMetricSourceType:
			list = append(list, formatResourceMetric(string(spec.Resource.Name), spec.Resource.Target, resourceCurrent(st, false)))
		case autoscalingv2.ContainerResourceMetricSourceType:
			list = append(list, formatResourceMetric(string(spec.ContainerResource.Name), spec.ContainerResource.Target, resourceCurrent(st, true)))
		default:
			list = append(list, "<unknown type>")
		}
	}
	if len(list) > shown {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:shown], ", "), len(list)-shown)
	}
	return strings.Join(list, ", ")
}

// resourceCurrent picks the current value of a (container) resource metric status.
func resourceCurrent(st *autoscalingv2.MetricStatus, container bool) *autoscalingv2.MetricValueStatus {
	switch {
	case st == nil:
		return nil
	case container && st.ContainerResource != nil:
		return &st.ContainerResource.Current
	case !container && st.Resource != nil:
		return &st.Resource.Current
	}
	return nil
}

func formatResourceMetric(name string, target autoscalingv2.MetricTarget, current *autoscalingv2.MetricValueStatus) string {
	cur := "<unknown>"
	if target.AverageValue != nil {
		if current != nil && current.AverageValue != nil {
			cur = current.AverageValue.String()
		}
		return fmt.Sprintf("%s: %s/%s", name, cur, target.AverageValue.String())
	}
	if current != nil && current.AverageUtilization != nil {
		cur = fmt.Sprintf("%d%%", *current.AverageUtilization)
	}
	tgt := "<auto>"
	if target.AverageUtilization != nil {
		tgt = fmt.Sprintf("%d%%", *target.AverageUtilization)
	}
	return fmt.Sprintf("%s: %s/%s", name, cur, tgt)
}
