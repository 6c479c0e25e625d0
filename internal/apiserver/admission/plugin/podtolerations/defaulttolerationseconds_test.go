package podtolerations

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
)

func TestDefaultTolerations(t *testing.T) {
	p := New()
	if !p.Handles(admission.Create) || !p.Handles(admission.Update) || p.Handles(admission.Delete) {
		t.Errorf("handles create %v update %v delete %v, want create and update as upstream", p.Handles(admission.Create), p.Handles(admission.Update), p.Handles(admission.Delete))
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	// An update replacing the tolerations (the conformance pod-generation spec does)
	// gets the defaults back.
	pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectNoSchedule}}}}
	if err := p.Admit(context.Background(), &admission.Attributes{Operation: admission.Update, Resource: pods, Object: pod}); err != nil {
		t.Fatal(err)
	}
	keys := map[string]int64{}
	for _, tol := range pod.Spec.Tolerations {
		if tol.TolerationSeconds != nil {
			keys[tol.Key] = *tol.TolerationSeconds
		}
	}
	if len(pod.Spec.Tolerations) != 3 || keys[corev1.TaintNodeNotReady] != 300 || keys[corev1.TaintNodeUnreachable] != 300 {
		t.Errorf("tolerations = %+v, want foo and the two defaults", pod.Spec.Tolerations)
	}
	// A pod tolerating every NoExecute taint gets nothing more.
	all := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}}
	if err := p.Admit(context.Background(), &admission.Attributes{Operation: admission.Create, Resource: pods, Object: all}); err != nil || len(all.Spec.Tolerations) != 1 {
		t.Errorf("tolerations = %+v, %v", all.Spec.Tolerations, err)
	}
}
