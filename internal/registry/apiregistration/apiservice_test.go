package apiregistration

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
)

func metricsAPIService() *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{
			Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"},
			Group:   "metrics.k8s.io", Version: "v1beta1", InsecureSkipTLSVerify: true,
			GroupPriorityMinimum: 100, VersionPriority: 100,
		},
	}
}

func TestAPIServiceIdentityAndDefaults(t *testing.T) {
	r := findResource(t, "apiservices")
	if r.Namespaced || !r.HasStatus || r.Kind != "APIService" || r.GroupVersion.String() != "apiregistration.k8s.io/v1" {
		t.Errorf("identity = %+v", r)
	}
	if msgs := r.ValidateName("v1beta1.metrics.k8s.io", false); len(msgs) != 0 {
		t.Errorf("valid name rejected: %v", msgs)
	}
	if msgs := r.ValidateName("a/b", false); len(msgs) == 0 {
		t.Errorf("a/b accepted as a name")
	}
	svc := metricsAPIService()
	r.Strategy.Default(svc)
	if got := ptr.Deref(svc.Spec.Service.Port, 0); got != 443 {
		t.Errorf("service port = %d, want 443", got)
	}
}

func TestAPIServiceValidate(t *testing.T) {
	r := findResource(t, "apiservices")
	tests := []struct {
		name   string
		mutate func(*apiregistrationv1.APIService)
		want   []fieldErr
	}{
		{"valid", func(*apiregistrationv1.APIService) {}, nil},
		{"local", func(s *apiregistrationv1.APIService) {
			s.Name, s.Spec = "v1.apps", apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1", GroupPriorityMinimum: 17800, VersionPriority: 15}
		}, nil},
		{"legacy core group", func(s *apiregistrationv1.APIService) {
			s.Name, s.Spec = "v1.", apiregistrationv1.APIServiceSpec{Version: "v1", GroupPriorityMinimum: 18000, VersionPriority: 1}
		}, nil},
		{"name is not version.group", func(s *apiregistrationv1.APIService) { s.Name = "metrics" },
			[]fieldErr{{field.ErrorTypeInvalid, "metadata.name"}}},
		{"empty group for a non-v1 version", func(s *apiregistrationv1.APIService) { s.Name, s.Spec.Group = "v1beta1.", "" },
			[]fieldErr{{field.ErrorTypeRequired, "spec.group"}}},
		{"priorities out of range", func(s *apiregistrationv1.APIService) { s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority = 0, 1001 },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.groupPriorityMinimum"}, {field.ErrorTypeInvalid, "spec.versionPriority"}}},
		{"service without name", func(s *apiregistrationv1.APIService) { s.Spec.Service.Name = "" },
			[]fieldErr{{field.ErrorTypeRequired, "spec.service.name"}}},
		{"bad port", func(s *apiregistrationv1.APIService) { s.Spec.Service.Port = ptr.To[int32](70000) },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.service.port"}}},
		{"insecure with a CA bundle", func(s *apiregistrationv1.APIService) { s.Spec.CABundle = []byte("pem") },
			[]fieldErr{{field.ErrorTypeInvalid, "spec.insecureSkipTLSVerify"}}},
		{"local with a CA bundle", func(s *apiregistrationv1.APIService) {
			s.Spec.Service, s.Spec.InsecureSkipTLSVerify, s.Spec.CABundle = nil, false, []byte("pem")
		}, []fieldErr{{field.ErrorTypeInvalid, "spec.caBundle"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := metricsAPIService()
			tt.mutate(s)
			r.Strategy.Default(s)
			assertErrs(t, r.Strategy.Validate(ctx, s), tt.want)
			assertErrs(t, r.Strategy.ValidateUpdate(ctx, s, metricsAPIService()), tt.want)
		})
	}
}

func TestAPIServicePrint(t *testing.T) {
	r := findResource(t, "apiservices")
	assertColumns(t, r, "Name", "Service", "Available", "Age")
	condition := func(status apiregistrationv1.ConditionStatus, reason string) []apiregistrationv1.APIServiceCondition {
		return []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: status, Reason: reason}}
	}
	tests := []struct {
		name       string
		service    *apiregistrationv1.ServiceReference
		conditions []apiregistrationv1.APIServiceCondition
		want       []interface{}
	}{
		{"local, no status", nil, nil, []interface{}{"v1beta1.metrics.k8s.io", "Local", "Unknown", "3d"}},
		{"available", &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}, condition("True", "Passed"),
			[]interface{}{"v1beta1.metrics.k8s.io", "kube-system/metrics-server", "True", "3d"}},
		{"unavailable with reason", &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"},
			condition("False", "MissingEndpoints"),
			[]interface{}{"v1beta1.metrics.k8s.io", "kube-system/metrics-server", "False (MissingEndpoints)", "3d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &apiregistrationv1.APIService{
				ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io", CreationTimestamp: threeDaysAgo},
				Spec:       apiregistrationv1.APIServiceSpec{Service: tt.service},
				Status:     apiregistrationv1.APIServiceStatus{Conditions: tt.conditions},
			}
			if got := r.Printer.Row(s); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestAPIServiceStatusValidation(t *testing.T) {
	r := findResource(t, "apiservices")
	old := metricsAPIService()
	r.Strategy.Default(old)
	updated := old.DeepCopy()
	updated.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: "Maybe"}}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), []fieldErr{{field.ErrorTypeNotSupported, "status.conditions[0].status"}})
	updated.Status.Conditions[0].Status = apiregistrationv1.ConditionFalse
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), nil)
}

func TestAPIServiceStatusClearedOnCreate(t *testing.T) {
	r := findResource(t, "apiservices")
	svc := metricsAPIService()
	svc.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue}}
	r.Strategy.PrepareForCreate(ctx, svc)
	if len(svc.Status.Conditions) != 0 {
		t.Errorf("status kept on create: %+v", svc.Status)
	}
}
