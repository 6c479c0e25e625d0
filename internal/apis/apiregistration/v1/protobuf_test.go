package v1

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// TestProtobufRoundTrip: an APIService and a list of them survive the protobuf
// serializer clients use (application/vnd.kubernetes.protobuf), negative priorities
// and a nil port included.
func TestProtobufRoundTrip(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ser := protobuf.NewSerializer(scheme, scheme)
	svc := fullAPIService()
	noPort := fullAPIService()
	noPort.Name, noPort.Spec.Service.Port, noPort.Spec.VersionPriority = "v1.example.com", nil, -5
	local := &APIService{TypeMeta: svc.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"}, Spec: APIServiceSpec{Group: "apps", Version: "v1", GroupPriorityMinimum: 17800, VersionPriority: 15}}
	list := &APIServiceList{TypeMeta: metav1.TypeMeta{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIServiceList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42"}, Items: []APIService{*svc, *noPort, *local}}
	for _, obj := range []runtime.Object{svc, noPort, local, list} {
		var buf bytes.Buffer
		if err := ser.Encode(obj, &buf); err != nil {
			t.Fatalf("encode %T: %v", obj, err)
		}
		got, _, err := ser.Decode(buf.Bytes(), nil, nil)
		if err != nil {
			t.Fatalf("decode %T: %v", obj, err)
		}
		if l, ok := obj.(*APIServiceList); ok {
			// Protobuf carries no kind for a list's items, as upstream's does not.
			l = l.DeepCopy()
			for i := range l.Items {
				l.Items[i].TypeMeta = metav1.TypeMeta{}
			}
			obj = l
		}
		if !apiequality.Semantic.DeepEqual(got, obj) {
			t.Errorf("round trip of %T:\n got %#v\nwant %#v", obj, got, obj)
		}
	}
}

// TestProtobufFieldNumbers: the spec's fields carry upstream's numbers (no 6;
// groupPriorityMinimum is 7, versionPriority 8), so upstream's clients read them.
func TestProtobufFieldNumbers(t *testing.T) {
	spec := fullAPIService().Spec
	want := map[protowire.Number]bool{1: true, 2: true, 3: true, 4: true, 5: true, 7: true, 8: true}
	got := map[protowire.Number]bool{}
	var values = map[protowire.Number]uint64{}
	if err := eachField(spec.marshal(), func(num protowire.Number, _ []byte, n uint64) error {
		got[num], values[num] = true, n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	for n := range want {
		if !got[n] {
			t.Errorf("field %d missing", n)
		}
	}
	if values[7] != 100 || values[8] != 100 {
		t.Errorf("priorities = %d, %d", values[7], values[8])
	}
}
