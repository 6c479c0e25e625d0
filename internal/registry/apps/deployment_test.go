package apps

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       appsv1.DeploymentSpec{Selector: webSelector(), Template: webTemplate()},
	}
}

func TestDeploymentIdentity(t *testing.T) {
	r := Deployments()
	if r.GroupVersionResource().String() != "apps/v1, Resource=deployments" || r.Kind != "Deployment" ||
		r.SingularName != "deployment" || !r.Namespaced || !reflect.DeepEqual(r.ShortNames, []string{"deploy"}) ||
		!reflect.DeepEqual(r.Categories, []string{"all"}) || !r.HasStatus || r.Scale == nil {
		t.Errorf("identity = %+v", r)
	}
	if _, ok := r.New().(*appsv1.Deployment); !ok {
		t.Error("New is not a Deployment")
	}
	if _, ok := r.NewList().(*appsv1.DeploymentList); !ok {
		t.Error("NewList is not a DeploymentList")
	}
}

func TestDeploymentDefaults(t *testing.T) {
	d := newDeployment()
	Deployments().Strategy.Default(d)
	want := appsv1.DeploymentSpec{
		Replicas: ptr(int32(1)),
		Selector: webSelector(),
		Strategy: appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr(intstr.FromString("25%")),
				MaxSurge:       ptr(intstr.FromString("25%")),
			},
		},
		RevisionHistoryLimit:    ptr(int32(10)),
		ProgressDeadlineSeconds: ptr(int32(600)),
	}
	got := d.Spec
	got.Template = corev1.PodTemplateSpec{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec = %+v\nwant %+v", got, want)
	}
	// The pod template gets the pod spec defaults.
	ps := d.Spec.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyAlways || ps.DNSPolicy != corev1.DNSClusterFirst ||
		ps.SchedulerName != corev1.DefaultSchedulerName || ps.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("template spec not defaulted: %+v", ps)
	}

	// Recreate gets no rolling update parameters; set values stay.
	r := newDeployment()
	r.Spec.Replicas = ptr(int32(0))
	r.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
	Deployments().Strategy.Default(r)
	if r.Spec.Strategy.RollingUpdate != nil || *r.Spec.Replicas != 0 {
		t.Errorf("recreate deployment defaulted to %+v", r.Spec)
	}
}

func TestDeploymentPrepareForCreateClearsStatus(t *testing.T) {
	d := newDeployment()
	d.Status.Replicas = 3
	if errs := createErrors(Deployments(), d); len(errs) != 0 {
		t.Fatalf("valid deployment rejected: %v", errs)
	}
	if !reflect.DeepEqual(d.Status, appsv1.DeploymentStatus{}) {
		t.Errorf("status = %+v, want empty", d.Status)
	}
}

func TestDeploymentValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.Deployment)
		want   []wantError
	}{
		{"valid", func(*appsv1.Deployment) {}, nil},
		{"no selector", func(d *appsv1.Deployment) { d.Spec.Selector = nil },
			[]wantError{{"spec.selector", field.ErrorTypeRequired}, {"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"empty selector", func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} },
			[]wantError{{"spec.selector", field.ErrorTypeInvalid}}},
		{"selector does not match", func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "db"} },
			[]wantError{{"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"negative replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(-1)) },
			[]wantError{{"spec.replicas", field.ErrorTypeInvalid}}},
		{"both zero", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromString("0%"))}
		}, []wantError{{"spec.strategy.rollingUpdate.maxUnavailable", field.ErrorTypeInvalid}}},
		{"over 100%", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr(intstr.FromString("150%"))}
		}, []wantError{{"spec.strategy.rollingUpdate.maxUnavailable", field.ErrorTypeInvalid}}},
		{"bad percent", func(d *appsv1.Deployment) {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr(intstr.FromString("lots"))}
		}, []wantError{{"spec.strategy.rollingUpdate.maxSurge", field.ErrorTypeInvalid}}},
		{"recreate with rolling update", func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{}}
		}, []wantError{{"spec.strategy.rollingUpdate", field.ErrorTypeForbidden}}},
		{"unknown strategy", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = "Blue" },
			[]wantError{{"spec.strategy", field.ErrorTypeNotSupported}}},
		{"restart never", func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]wantError{{"spec.template.spec.restartPolicy", field.ErrorTypeNotSupported}}},
		{"active deadline", func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr(int64(5)) },
			[]wantError{{"spec.template.spec.activeDeadlineSeconds", field.ErrorTypeForbidden}}},
		{"progress deadline not above minReady", func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 700
		}, []wantError{{"spec.progressDeadlineSeconds", field.ErrorTypeInvalid}}},
		{"container without image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" },
			[]wantError{{"spec.template.spec.containers[0].image", field.ErrorTypeRequired}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment()
			tt.mutate(d)
			checkErrors(t, createErrors(Deployments(), d), tt.want)
		})
	}
}

func TestDeploymentMessages(t *testing.T) {
	d := newDeployment()
	d.Spec.Template.Labels = map[string]string{"app": "db"}
	errs := createErrors(Deployments(), d)
	if len(errs) != 1 || errs[0].Detail != "`selector` does not match template `labels`" {
		t.Errorf("errors = %v", errs)
	}
}

func TestDeploymentUpdateSelectorImmutable(t *testing.T) {
	old := newDeployment()
	d := newDeployment()
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}
	d.Spec.Template.Labels["tier"] = "front"
	checkErrors(t, updateErrors(Deployments(), d, old), []wantError{{"spec.selector", field.ErrorTypeInvalid}})

	scaled := newDeployment()
	scaled.Spec.Replicas = ptr(int32(5))
	checkErrors(t, updateErrors(Deployments(), scaled, newDeployment()), nil)
}

func TestDeploymentPrinter(t *testing.T) {
	p := Deployments().Printer
	want := []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"}
	if got := columnNames(p); !reflect.DeepEqual(got, want) {
		t.Errorf("columns = %v", got)
	}
	for i, c := range p.Columns {
		if wide := i >= 5; (c.Priority > 0) != wide {
			t.Errorf("column %s priority %d", c.Name, c.Priority)
		}
	}
	d := newDeployment()
	d.CreationTimestamp = metav1.NewTime(time.Now().Add(-20 * time.Minute)) // past 10m ages print whole minutes: "20m" for a minute
	d.Spec.Replicas = ptr(int32(3))
	d.Status = appsv1.DeploymentStatus{ReadyReplicas: 2, UpdatedReplicas: 3, AvailableReplicas: 2}
	checkRow(t, p, d, 4, []interface{}{"web", "2/3", int64(3), int64(2), "nginx,sidecar", "nginx:1.27,busybox", "app=web"})
	if age := p.Row(d)[4]; age != "20m" {
		t.Errorf("age = %v, want 20m", age)
	}
}

func TestDeploymentScale(t *testing.T) {
	s := Deployments().Scale
	d := newDeployment()
	d.Spec.Replicas = ptr(int32(3))
	d.Status.Replicas = 2
	d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}
	spec, status, sel := s.Get(d)
	if spec != 3 || status != 2 || sel != "app=web,tier in (a,b)" {
		t.Errorf("Get = %d %d %q", spec, status, sel)
	}
	s.Set(d, 7)
	if *d.Spec.Replicas != 7 {
		t.Errorf("replicas = %d after Set(7)", *d.Spec.Replicas)
	}
}
