package core

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestLimitRangeDefaults(t *testing.T) {
	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: rl("cpu", "2", "memory", "1Gi"), Min: rl("cpu", "100m", "ephemeral-storage", "1Gi"), Default: rl("cpu", "500m")},
		{Type: corev1.LimitTypePod, Max: rl("cpu", "4")},
	}}}
	limitRangesResource().Strategy.Default(lr)
	c := lr.Spec.Limits[0]
	if !equality.Semantic.DeepEqual(c.Default, rl("cpu", "500m", "memory", "1Gi")) {
		t.Errorf("default = %v, want the explicit cpu and memory from max", c.Default)
	}
	if !equality.Semantic.DeepEqual(c.DefaultRequest, rl("cpu", "500m", "memory", "1Gi", "ephemeral-storage", "1Gi")) {
		t.Errorf("defaultRequest = %v, want the default limits plus ephemeral-storage from min", c.DefaultRequest)
	}
	if p := lr.Spec.Limits[1]; p.Default != nil || p.DefaultRequest != nil {
		t.Errorf("pod item got defaults: %+v", p)
	}
}

func TestLimitRangeValidate(t *testing.T) {
	tests := []struct {
		name string
		item corev1.LimitRangeItem
		want []string
	}{
		{"valid", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m"), Max: rl("cpu", "1")}, nil},
		{"min above max", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "2"), Max: rl("cpu", "1")},
			[]string{`spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1`}},
		{"negative", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "-1Gi")},
			[]string{`spec.limits[0].max[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`}},
		{"pod default", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Default: rl("cpu", "1")},
			[]string{"spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'"}},
		{"unknown type", corev1.LimitRangeItem{Type: "Volume"},
			[]string{`spec.limits[0].type: Invalid value: "Volume": must be a standard limit type or fully qualified`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{tc.item}}}
			assertErrors(t, limitRangesResource().Strategy.Validate(context.Background(), lr), tc.want)
		})
	}
}

func TestLimitRangePrinter(t *testing.T) {
	created := time.Date(2026, 11, 30, 1, 2, 3, 0, time.FixedZone("CET", 3600))
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", CreationTimestamp: metav1.NewTime(created)}}
	assertRow(t, limitRangesResource().Printer.Row(lr), []interface{}{"limits", "2026-11-30T00:02:03Z"})
}
