package apps

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db",
			Selector:    webSelector(),
			Template:    webTemplate(),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
			}},
		},
	}
}

func TestStatefulSetDefaults(t *testing.T) {
	ss := newStatefulSet()
	StatefulSets().Strategy.Default(ss)
	s := ss.Spec
	if *s.Replicas != 1 || s.PodManagementPolicy != appsv1.OrderedReadyPodManagement || *s.RevisionHistoryLimit != 10 {
		t.Errorf("spec = %+v", s)
	}
	wantUS := appsv1.StatefulSetUpdateStrategy{
		Type:          appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(0)), MaxUnavailable: ptr(intstr.FromInt32(1))},
	}
	if !reflect.DeepEqual(s.UpdateStrategy, wantUS) {
		t.Errorf("updateStrategy = %+v", s.UpdateStrategy)
	}
	wantPolicy := &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
	if !reflect.DeepEqual(s.PersistentVolumeClaimRetentionPolicy, wantPolicy) {
		t.Errorf("retention = %+v", s.PersistentVolumeClaimRetentionPolicy)
	}
	pvc := s.VolumeClaimTemplates[0]
	if pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("claim template = %+v", pvc)
	}

	// An explicit RollingUpdate type without parameters keeps them unset, as upstream.
	explicit := newStatefulSet()
	explicit.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	StatefulSets().Strategy.Default(explicit)
	if explicit.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("rollingUpdate = %+v, want nil", explicit.Spec.UpdateStrategy.RollingUpdate)
	}
}

func TestStatefulSetValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		want   []wantError
	}{
		{"valid", func(*appsv1.StatefulSet) {}, nil},
		{"container mounts a claim template", func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, nil},
		{"claim template replaces a same-named volume", func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, nil},
		{"mount of an unknown volume", func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}}
		}, []wantError{{"spec.template.spec.containers[0].volumeMounts[0].name", field.ErrorTypeNotFound}}},
		{"no service name is fine", func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "" }, nil},
		{"bad service name", func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "DB_1" },
			[]wantError{{"spec.serviceName", field.ErrorTypeInvalid}}},
		{"no selector", func(ss *appsv1.StatefulSet) { ss.Spec.Selector = nil },
			[]wantError{{"spec.selector", field.ErrorTypeRequired}, {"spec.template.metadata.labels", field.ErrorTypeInvalid}}},
		{"bad pod management", func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = "Random" },
			[]wantError{{"spec.podManagementPolicy", field.ErrorTypeInvalid}}},
		{"negative partition", func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(-1))}
		}, []wantError{{"spec.updateStrategy.rollingUpdate.partition", field.ErrorTypeInvalid}}},
		{"zero max unavailable", func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr(intstr.FromInt32(0))}
		}, []wantError{{"spec.updateStrategy.rollingUpdate.maxUnavailable", field.ErrorTypeInvalid}}},
		{"on delete with rolling update", func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{}}
		}, []wantError{{"spec.updateStrategy.rollingUpdate", field.ErrorTypeInvalid}}},
		{"bad retention", func(ss *appsv1.StatefulSet) {
			ss.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Keep"}
		}, []wantError{{"spec.persistentVolumeClaimRetentionPolicy.whenDeleted", field.ErrorTypeNotSupported}}},
		{"negative ordinal start", func(ss *appsv1.StatefulSet) { ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1} },
			[]wantError{{"spec.ordinals.start", field.ErrorTypeInvalid}}},
		{"restart never", func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			[]wantError{{"spec.template.spec.restartPolicy", field.ErrorTypeNotSupported}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := newStatefulSet()
			tt.mutate(ss)
			checkErrors(t, createErrors(StatefulSets(), ss), tt.want)
		})
	}
}

func TestStatefulSetUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		want   []wantError
	}{
		{"scale", func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr(int32(3)) }, nil},
		{"new image", func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.Containers[0].Image = "nginx:2" }, nil},
		{"partition", func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}, nil},
		{"history and retention", func(ss *appsv1.StatefulSet) {
			ss.Spec.RevisionHistoryLimit = ptr(int32(2))
			ss.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
		}, nil},
		{"service name", func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "other" },
			[]wantError{{"spec", field.ErrorTypeForbidden}}},
		{"claim templates", func(ss *appsv1.StatefulSet) { ss.Spec.VolumeClaimTemplates[0].Name = "logs" },
			[]wantError{{"spec", field.ErrorTypeForbidden}}},
		{"pod management", func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = appsv1.ParallelPodManagement },
			[]wantError{{"spec", field.ErrorTypeForbidden}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := newStatefulSet()
			tt.mutate(ss)
			errs := updateErrors(StatefulSets(), ss, newStatefulSet())
			checkErrors(t, errs, tt.want)
			if len(tt.want) > 0 && errs[0].Detail != "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden" {
				t.Errorf("detail = %q", errs[0].Detail)
			}
		})
	}
}

func TestStatefulSetPrinterAndScale(t *testing.T) {
	r := StatefulSets()
	if got := columnNames(r.Printer); !reflect.DeepEqual(got, []string{"Name", "Ready", "Age", "Containers", "Images"}) {
		t.Errorf("columns = %v", got)
	}
	ss := newStatefulSet()
	ss.Spec.Replicas = ptr(int32(3))
	ss.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 1}
	checkRow(t, r.Printer, ss, 2, []interface{}{"db", "1/3", "nginx,sidecar", "nginx:1.27,busybox"})
	if spec, status, sel := r.Scale.Get(ss); spec != 3 || status != 3 || sel != "app=web" {
		t.Errorf("scale = %d %d %q", spec, status, sel)
	}
	if !reflect.DeepEqual(r.ShortNames, []string{"sts"}) || r.Kind != "StatefulSet" {
		t.Errorf("identity = %+v", r)
	}
}
