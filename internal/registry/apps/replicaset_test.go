package apps

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newReplicaSet() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f", Namespace: "default"},
		Spec:       appsv1.ReplicaSetSpec{Selector: webSelector(), Template: webTemplate()},
	}
}

func TestReplicaSetIdentityAndFields(t *testing.T) {
	r := ReplicaSets()
	if r.Resource != "replicasets" || r.Kind != "ReplicaSet" || !reflect.DeepEqual(r.ShortNames, []string{"rs"}) ||
		!reflect.DeepEqual(r.Categories, []string{"all"}) || !r.HasStatus || r.Scale == nil {
		t.Errorf("identity = %+v", r)
	}
	rs := newReplicaSet()
	rs.Status.Replicas = 4
	if got := r.Fields(rs); !reflect.DeepEqual(map[string]string(got), map[string]string{"status.replicas": "4"}) {
		t.Errorf("fields = %v", got)
	}
}

func TestReplicaSetDefaults(t *testing.T) {
	rs := newReplicaSet()
	ReplicaSets().Strategy.Default(rs)
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", rs.Spec.Replicas)
	}
	if rs.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("template not defaulted: %+v", rs.Spec.Template.Spec)
	}
}

func TestReplicaSetValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.ReplicaSet)
		want   []wantError
	}{
		{"valid", func(*appsv1.ReplicaSet) {}, nil},
		{"no selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil },
			[]wantError{{"spec.selector", field.ErrorTypeRequired}, {"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"mismatch", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Labels = nil },
			[]wantError{{"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"negative replicas", func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr(int32(-2)) },
			[]wantError{{"spec.replicas", field.ErrorTypeInvalid}}},
		{"negative minReadySeconds", func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = -1 },
			[]wantError{{"spec.minReadySeconds", field.ErrorTypeInvalid}}},
		{"restart on failure", func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			[]wantError{{"spec.template.spec.restartPolicy", field.ErrorTypeNotSupported}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicaSet()
			tt.mutate(rs)
			checkErrors(t, createErrors(ReplicaSets(), rs), tt.want)
		})
	}
}

func TestReplicaSetUpdate(t *testing.T) {
	rs := newReplicaSet()
	rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpExists}}}
	checkErrors(t, updateErrors(ReplicaSets(), rs, newReplicaSet()), []wantError{{"spec.selector", field.ErrorTypeInvalid}})
}

func TestReplicaSetPrinter(t *testing.T) {
	p := ReplicaSets().Printer
	if got := columnNames(p); !reflect.DeepEqual(got, []string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"}) {
		t.Errorf("columns = %v", got)
	}
	rs := newReplicaSet()
	rs.Spec.Replicas = ptr(int32(3))
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1}
	checkRow(t, p, rs, 4, []interface{}{"web-5d4f", int64(3), int64(3), int64(1), "nginx,sidecar", "nginx:1.27,busybox", "app=web"})
}
