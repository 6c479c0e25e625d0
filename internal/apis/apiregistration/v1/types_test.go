package v1

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

func fullAPIService() *APIService {
	port := int32(8443)
	return &APIService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io", Labels: map[string]string{"k8s-app": "metrics-server"}},
		Spec: APIServiceSpec{
			Service:              &ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: &port},
			Group:                "metrics.k8s.io",
			Version:              "v1beta1",
			CABundle:             []byte("pem"),
			GroupPriorityMinimum: 100,
			VersionPriority:      100,
		},
		Status: APIServiceStatus{Conditions: []APIServiceCondition{{
			Type: Available, Status: ConditionTrue, Reason: "Passed", Message: "all checks passed",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)),
		}}},
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	orig := fullAPIService()
	cp := orig.DeepCopyObject().(*APIService)
	if !reflect.DeepEqual(orig, cp) {
		t.Fatalf("copy differs from the original")
	}
	*cp.Spec.Service.Port = 1
	cp.Spec.Service.Name = "other"
	cp.Spec.CABundle[0] = 'X'
	cp.Status.Conditions[0].Reason = "Changed"
	cp.Labels["k8s-app"] = "changed"
	if !reflect.DeepEqual(orig, fullAPIService()) {
		t.Errorf("changing the copy changed the original: %+v", orig)
	}

	list := &APIServiceList{Items: []APIService{*fullAPIService()}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	listCopy := list.DeepCopyObject().(*APIServiceList)
	listCopy.Items[0].Spec.Group = "changed"
	if list.Items[0].Spec.Group != "metrics.k8s.io" || !reflect.DeepEqual(listCopy.ListMeta, list.ListMeta) {
		t.Errorf("list copy is not independent")
	}
	var nilService *APIService
	if nilService.DeepCopy() != nil {
		t.Errorf("DeepCopy of nil must be nil")
	}
}

// The wire format must be what kubectl and client-go expect from upstream.
func TestJSONWireFormat(t *testing.T) {
	local := &APIService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"},
		Spec:       APIServiceSpec{Group: "apps", Version: "v1", GroupPriorityMinimum: 17800, VersionPriority: 15},
	}
	got, err := json.Marshal(local)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"APIService","apiVersion":"apiregistration.k8s.io/v1","metadata":{"name":"v1.apps"},` +
		`"spec":{"group":"apps","version":"v1","groupPriorityMinimum":17800,"versionPriority":15},"status":{}}`
	if string(got) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", got, want)
	}

	data, err := json.Marshal(fullAPIService())
	if err != nil {
		t.Fatal(err)
	}
	var fields struct{ Spec map[string]interface{} }
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"service", "group", "version", "caBundle", "groupPriorityMinimum", "versionPriority"} {
		if _, ok := fields.Spec[key]; !ok {
			t.Errorf("spec.%s missing from %s", key, data)
		}
	}
	var back APIService
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	// metav1.Time decodes into local time, so compare semantically.
	if !apiequality.Semantic.DeepEqual(&back, fullAPIService()) {
		t.Errorf("JSON round trip changed the object:\n got %+v\nwant %+v", back, fullAPIService())
	}
}

func TestSchemeDecodes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	obj, gvk, err := codecs.UniversalDeserializer().Decode([]byte(`{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
		"metadata":{"name":"v1beta1.metrics.k8s.io"},"spec":{"service":{"namespace":"kube-system","name":"metrics-server"},
		"group":"metrics.k8s.io","version":"v1beta1","insecureSkipTLSVerify":true,"groupPriorityMinimum":100,"versionPriority":100}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, ok := obj.(*APIService)
	if !ok || gvk.Kind != "APIService" || gvk.GroupVersion() != SchemeGroupVersion {
		t.Fatalf("decoded %T %v", obj, gvk)
	}
	if svc.Spec.Service.Name != "metrics-server" || !svc.Spec.InsecureSkipTLSVerify || svc.Spec.Service.Port != nil {
		t.Errorf("decoded spec = %+v", svc.Spec)
	}
	if !scheme.Recognizes(SchemeGroupVersion.WithKind("APIServiceList")) {
		t.Errorf("APIServiceList not registered")
	}
}
