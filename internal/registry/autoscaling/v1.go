package autoscaling

import (
	"context"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// hpaV1Strategy serves autoscaling/v1 objects with the v2 rules: upstream validates the
// internal (v2-shaped) object whatever version a client sent, so the error paths are v2's
// (spec.metrics[0].resource.target.averageUtilization). It accepts v1 objects, which it
// converts and writes back, and v2 objects, should the server convert first.
type hpaV1Strategy struct{}

// Default applies autoscaling/v1's own defaulting: minReplicas 1. The 80% CPU default
// comes with the conversion to v2, which sees the metrics kept in annotations.
func (hpaV1Strategy) Default(obj runtime.Object) {
	switch o := obj.(type) {
	case *autoscalingv1.HorizontalPodAutoscaler:
		if o.Spec.MinReplicas == nil {
			o.Spec.MinReplicas = ptr(int32(1))
		}
	case *autoscalingv2.HorizontalPodAutoscaler:
		defaultV2(o)
	}
}

func (hpaV1Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	viaV2(obj, func(hpa *autoscalingv2.HorizontalPodAutoscaler) { hpaStrategy{}.PrepareForCreate(ctx, hpa) })
}

// PrepareForUpdate keeps the status a v1 object carries in annotations (current
// metrics, conditions) as stored, as the server keeps the status fields: a client
// updating the spec must not roll them back to what it read.
func (hpaV1Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	o, ok1 := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	oldO, ok2 := old.(*autoscalingv1.HorizontalPodAutoscaler)
	if !ok1 || !ok2 {
		return
	}
	annotations := make(map[string]string, len(o.Annotations))
	for k, v := range o.Annotations {
		annotations[k] = v
	}
	for _, key := range []string{metricStatusesAnnotation, conditionsAnnotation} {
		delete(annotations, key)
		if v, found := oldO.Annotations[key]; found {
			annotations[key] = v
		}
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	o.Annotations = annotations
}

func (hpaV1Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	hpa, err := asV2(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return hpaStrategy{}.Validate(ctx, hpa)
}

func (hpaV1Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	hpa, err := asV2(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	oldHPA, err := asV2(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return hpaStrategy{}.ValidateUpdate(ctx, hpa, oldHPA)
}

// viaV2 applies change to obj as a v2 object, writing the result back into a v1 obj.
func viaV2(obj runtime.Object, change func(*autoscalingv2.HorizontalPodAutoscaler)) {
	switch o := obj.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		change(o)
	case *autoscalingv1.HorizontalPodAutoscaler:
		v2, err := v1ToV2(o)
		if err != nil {
			return
		}
		change(v2)
		if v1, err := v2ToV1(v2); err == nil {
			v1.TypeMeta = o.TypeMeta
			*o = *v1
		}
	}
}
