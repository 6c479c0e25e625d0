package core

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func newRC(mutate func(*corev1.ReplicationController)) *corev1.ReplicationController {
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ReplicationControllerSpec{
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1"}}}},
	}}
	mutate(rc)
	defaultReplicationController(rc)
	return rc
}

func TestReplicationControllerDefaults(t *testing.T) {
	rc := newRC(func(*corev1.ReplicationController) {})
	want := map[string]string{"app": "web"}
	if *rc.Spec.Replicas != 1 || !equality.Semantic.DeepEqual(rc.Spec.Selector, want) || !equality.Semantic.DeepEqual(rc.Labels, want) {
		t.Errorf("rc = replicas %d selector %v labels %v, want 1 and the template labels", *rc.Spec.Replicas, rc.Spec.Selector, rc.Labels)
	}
	if rc.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("template not defaulted: %+v", rc.Spec.Template.Spec)
	}
	own := newRC(func(rc *corev1.ReplicationController) {
		rc.Labels = map[string]string{"tier": "front"}
		rc.Spec.Replicas = ptrTo(int32(0))
	})
	if *own.Spec.Replicas != 0 || own.Labels["tier"] != "front" || len(own.Labels) != 1 {
		t.Errorf("explicit values overwritten: replicas %d labels %v", *own.Spec.Replicas, own.Labels)
	}
}

func TestReplicationControllerValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.ReplicationController)
		want   []string
	}{
		{"valid", func(*corev1.ReplicationController) {}, nil},
		{"selector does not match", func(rc *corev1.ReplicationController) { rc.Spec.Selector = map[string]string{"app": "api"} },
			[]string{`spec.template.metadata.labels: Invalid value: {"app":"web"}: ` + "`selector` does not match template `labels`"}},
		{"negative replicas", func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptrTo(int32(-1)) },
			[]string{"spec.replicas: Invalid value: -1: must be greater than or equal to 0"}},
		{"restart policy", func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		},
			[]string{`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`}},
		{"no template", func(rc *corev1.ReplicationController) {
			rc.Spec.Template = nil
			rc.Spec.Selector = map[string]string{"app": "web"}
		},
			[]string{"spec.template: Required value"}},
		{"bad container", func(rc *corev1.ReplicationController) { rc.Spec.Template.Spec.Containers[0].Image = "" },
			[]string{"spec.template.spec.containers[0].image: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, replicationControllersResource().Strategy.Validate(context.Background(), newRC(tc.mutate)), tc.want)
		})
	}
}

func TestReplicationControllerScaleFieldsPrinter(t *testing.T) {
	r := replicationControllersResource()
	rc := newRC(func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptrTo(int32(3)) })
	rc.Status = corev1.ReplicationControllerStatus{Replicas: 2, ReadyReplicas: 1}

	spec, status, selector := r.Scale.Get(rc)
	if spec != 3 || status != 2 || selector != "app=web" {
		t.Errorf("scale = %d/%d %q, want 3/2 app=web", spec, status, selector)
	}
	r.Scale.Set(rc, 5)
	if *rc.Spec.Replicas != 5 {
		t.Errorf("replicas = %d after scale, want 5", *rc.Spec.Replicas)
	}
	if got := r.Fields(rc); !equality.Semantic.DeepEqual(got, fields.Set{"status.replicas": "2"}) {
		t.Errorf("fields = %v", got)
	}
	assertRow(t, r.Printer.Row(rc), []interface{}{"web", int64(5), int64(2), int64(1), "<unknown>", "web", "nginx:1", "app=web"})
}
