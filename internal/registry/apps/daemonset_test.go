package apps

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newDaemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"},
		Spec:       appsv1.DaemonSetSpec{Selector: webSelector(), Template: webTemplate()},
	}
}

func TestDaemonSetDefaults(t *testing.T) {
	ds := newDaemonSet()
	DaemonSets().Strategy.Default(ds)
	want := appsv1.DaemonSetUpdateStrategy{
		Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: ptr(intstr.FromInt32(1)),
			MaxSurge:       ptr(intstr.FromInt32(0)),
		},
	}
	if !reflect.DeepEqual(ds.Spec.UpdateStrategy, want) {
		t.Errorf("updateStrategy = %+v", ds.Spec.UpdateStrategy)
	}
	if ds.Spec.RevisionHistoryLimit == nil || *ds.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("revisionHistoryLimit = %v", ds.Spec.RevisionHistoryLimit)
	}

	onDelete := newDaemonSet()
	onDelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	DaemonSets().Strategy.Default(onDelete)
	if onDelete.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("OnDelete got rollingUpdate %+v", onDelete.Spec.UpdateStrategy.RollingUpdate)
	}
}

func TestDaemonSetValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.DaemonSet)
		want   []wantError
	}{
		{"valid", func(*appsv1.DaemonSet) {}, nil},
		{"no selector", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = nil },
			[]wantError{{"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"empty selector", func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			[]wantError{{"spec.selector", field.ErrorTypeInvalid}}},
		{"mismatch", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Labels = map[string]string{"x": "y"} },
			[]wantError{{"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"surge and unavailable", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxSurge: ptr(intstr.FromInt32(1))}
		}, []wantError{{"spec.updateStrategy.rollingUpdate.maxSurge", field.ErrorTypeInvalid}}},
		{"both zero", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr(intstr.FromString("0%"))}
		}, []wantError{{"spec.updateStrategy.rollingUpdate.maxUnavailable", field.ErrorTypeRequired}}},
		{"surge over 100%", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromString("101%"))}
		}, []wantError{{"spec.updateStrategy.rollingUpdate.maxSurge", field.ErrorTypeInvalid}}},
		{"unknown strategy", func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Sometimes" },
			[]wantError{{"spec.updateStrategy", field.ErrorTypeNotSupported}}},
		{"active deadline", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(1)) },
			[]wantError{{"spec.template.spec.activeDeadlineSeconds", field.ErrorTypeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDaemonSet()
			tt.mutate(ds)
			checkErrors(t, createErrors(DaemonSets(), ds), tt.want)
		})
	}
}

func TestDaemonSetUpdateSelectorImmutable(t *testing.T) {
	ds := newDaemonSet()
	ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
	ds.Spec.Template.Labels["v"] = "2"
	checkErrors(t, updateErrors(DaemonSets(), ds, newDaemonSet()), []wantError{{"spec.selector", field.ErrorTypeInvalid}})
}

func TestDaemonSetPrinter(t *testing.T) {
	p := DaemonSets().Printer
	want := []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"}
	if got := columnNames(p); !reflect.DeepEqual(got, want) {
		t.Errorf("columns = %v", got)
	}
	ds := newDaemonSet()
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2}
	checkRow(t, p, ds, 7, []interface{}{"agent", int64(3), int64(3), int64(2), int64(3), int64(2), "kubernetes.io/os=linux",
		"nginx,sidecar", "nginx:1.27,busybox", "app=web"})

	none := newDaemonSet()
	if cell := p.Row(none)[6]; cell != "<none>" {
		t.Errorf("empty node selector printed %q, want <none>", cell)
	}
}

func TestDaemonSetTemplateGeneration(t *testing.T) {
	ctx := context.Background()
	s := DaemonSets().Strategy
	ds := newDaemonSet()
	ds.Annotations = map[string]string{"deprecated.daemonset.template.generation": "7", "owner": "ops"}
	s.Default(ds)
	s.PrepareForCreate(ctx, ds)
	if got := ds.Annotations; !reflect.DeepEqual(got, map[string]string{"deprecated.daemonset.template.generation": "1", "owner": "ops"}) {
		t.Fatalf("annotations after create = %v", got)
	}

	tests := []struct {
		name   string
		mutate func(*appsv1.DaemonSet)
		want   string
	}{
		{"template changed", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" }, "2"},
		{"other spec changed", func(d *appsv1.DaemonSet) { d.Spec.MinReadySeconds = 5 }, "1"},
		{"client sets the annotation", func(d *appsv1.DaemonSet) { d.Annotations["deprecated.daemonset.template.generation"] = "9" }, "1"},
		{"client drops the annotation", func(d *appsv1.DaemonSet) { delete(d.Annotations, "deprecated.daemonset.template.generation") }, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updated := ds.DeepCopy()
			tt.mutate(updated)
			s.PrepareForUpdate(ctx, updated, ds)
			if got := updated.Annotations["deprecated.daemonset.template.generation"]; got != tt.want {
				t.Errorf("template generation = %q, want %q", got, tt.want)
			}
			if errs := s.ValidateUpdate(ctx, updated, ds); len(errs) != 0 {
				t.Errorf("update rejected: %v", errs)
			}
		})
	}
}
