package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

func patchTestPod() *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{"a": "1"}, Finalizers: []string{"f/one"}, ResourceVersion: "7", Generation: 2,
			CreationTimestamp: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "c", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
				Env:       []corev1.EnvVar{{Name: "A", Value: "1"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
				{Name: "d", Image: "j"}},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				LastTransitionTime: metav1.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}},
			PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}, PodIP: "10.0.0.1"},
	}
}

// TestStrategicPatchTyped: a strategic merge patch of a built-in object gives what
// patching its JSON text and decoding the result gives, for the shapes controllers and
// kubelets send and the directives of the format.
func TestStrategicPatchTyped(t *testing.T) {
	s := fuzzServer(t)
	h := &resourceHandler{Resource: fuzzPodResource}
	for _, patch := range []string{
		`{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/3 nodes"}]}}`,
		`{"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-02-01T00:00:00Z"}],"phase":"Running"}}`,
		`{"status":{"$setElementOrder/conditions":[{"type":"Ready"},{"type":"PodScheduled"}],"conditions":[{"type":"Ready","status":"True"}]}}`,
		`{"status":{"conditions":[{"$patch":"delete","type":"PodScheduled"}],"podIPs":null,"podIP":null}}`,
		`{"status":{"nominatedNodeName":"n1","observedGeneration":3,"startTime":"2026-03-01T00:00:00Z"}}`,
		`{"metadata":{"labels":{"b":"2","app":null},"annotations":null,"finalizers":["f/two"],"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u1","controller":true}]}}`,
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":["f/one"]}}`,
		`{"spec":{"containers":[{"name":"c","image":"k","env":[{"name":"B","value":"2"}]}],"tolerations":[{"key":"t","operator":"Equal","value":"v","effect":"NoSchedule","tolerationSeconds":300}]}}`,
		`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1.5","memory":"1Gi"},"limits":{"memory":"2e9"}}}]}}`,
		`{"spec":{"$setElementOrder/containers":[{"name":"d"},{"name":"c"}],"containers":[{"name":"c","$patch":"replace","image":"z"}]}}`,
		`{"spec":{"activeDeadlineSeconds":600,"terminationGracePeriodSeconds":null}}`,
		`{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"In","values":["x"]}]}]}}}}}`,
		`{"spec":{"$retainKeys":["containers"],"containers":[{"name":"c","image":"i"}]}}`,
		`{"metadata":{"labels":{"b":"2"}},"status":null}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"z":"1"}}}`, // the whole object merged
		`{}`, `null`,
	} {
		t.Run(patch, func(t *testing.T) {
			current := patchTestPod()
			req := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/ns/pods/p/status", nil)
			got, err := s.applyPatch(httptest.NewRecorder(), req, h, current.DeepCopy(), string(types.StrategicMergePatchType), []byte(patch))
			if err != nil {
				t.Fatalf("patch: %v", err)
			}
			currentJSON, _ := json.Marshal(current)
			patchedJSON, err := strategicpatch.StrategicMergePatch(currentJSON, []byte(patch), &corev1.Pod{})
			if err != nil {
				t.Fatal(err)
			}
			want := &corev1.Pod{}
			if _, err := s.codecs.decodeInto(mediaJSON, patchedJSON, corev1.SchemeGroupVersion.WithKind("Pod"), want); err != nil {
				t.Fatal(err)
			}
			// Compared as a client sees them (encoded) and field by field.
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) || !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("patched\n got %s\nwant %s", gj, wj)
			}
		})
	}
}

// TestStrategicPatchTypedErrors: what a client is told about a patch that does not
// fit, in upstream's words.
func TestStrategicPatchTypedErrors(t *testing.T) {
	s := fuzzServer(t)
	h := &resourceHandler{Resource: fuzzPodResource}
	for _, tc := range []struct {
		name, query, patch string
		code               int
		message            string
		warning            string
	}{
		{"a field of the wrong type", "", `{"spec":{"activeDeadlineSeconds":"soon"}}`, 422, ` "" is invalid: patch: Invalid value: "map[spec:map[activeDeadlineSeconds:soon]]": unrecognized type: int64`, ""},
		{"not JSON", "", `{"spec":`, 400, "error decoding patch: unexpected end of JSON input", ""},
		{"not an object", "", `[1]`, 400, "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}", ""},
		{"another kind", "", `{"kind":"Node"}`, 400, `Node in version "v1" cannot be handled as a Pod: the kind in the data does not match the kind of the resource`, ""},
		{"another version", "", `{"apiVersion":"v2"}`, 400, "the API version in the data (v2) does not match the expected API version (v1)", ""},
		{"an unknown field, strict", "?fieldValidation=Strict", `{"spec":{"bogus":1,"containers":[{"name":"c","extra":true}]}}`, 400,
			`strict decoding error: unknown field "spec.bogus", unknown field "spec.containers[0].extra"`, ""},
		{"an unknown field, warned", "", `{"status":{"bogus":1}}`, 0, "", `299 - "unknown field \"status.bogus\""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/ns/pods/p"+tc.query, nil)
			rec := httptest.NewRecorder()
			_, err := s.applyPatch(rec, req, h, patchTestPod(), string(types.StrategicMergePatchType), []byte(tc.patch))
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				if got := rec.Header().Get("Warning"); got != tc.warning {
					t.Errorf("warning = %q, want %q", got, tc.warning)
				}
				return
			}
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("err = %v, want a status error", err)
			}
			if got := status.Status(); int(got.Code) != tc.code || !strings.Contains(got.Message, tc.message) {
				t.Errorf("status = %d %q, want %d containing %q", got.Code, got.Message, tc.code, tc.message)
			}
		})
	}
}
