package protodecode

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// The upstream serializers these tests compare against and encode with, as the
// apiserver does: objects in an envelope, watch frames bare.
var (
	upstreamSerializer    = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	upstreamRawSerializer = protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
)

// testPod is a pod as a Deployment's ReplicaSet makes it, padded by an annotation
// of pad bytes so that pods differ in size.
func testPod(name string, pad int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         "default",
			UID:               types.UID("uid-" + name),
			ResourceVersion:   "1234",
			GenerateName:      "web-5d4f8b9c7-",
			CreationTimestamp: metav1.Unix(1700000000, 0),
			Labels:            map[string]string{"app": "web", "pod-template-hash": "5d4f8b9c7"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4f8b9c7",
				UID: "rs-uid", Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1", Time: ptr(metav1.Unix(1700000000, 0)), FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"rs-uid\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{},"f:resources":{}}},"f:dnsPolicy":{},"f:restartPolicy":{}}}`)},
			}, {
				Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status",
				APIVersion: "v1", Time: ptr(metav1.Unix(1700000005, 0)), FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:hostIP":{},"f:phase":{},"f:podIP":{}}}`)},
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "registry.example/web:1.2.3",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			NodeName:                      "node-1",
			SchedulerName:                 "default-scheduler",
			Tolerations: []corev1.Toleration{{
				Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](300),
			}},
		},
		Status: corev1.PodStatus{
			Phase:  corev1.PodRunning,
			HostIP: "10.0.0.1",
			PodIP:  "10.244.0.7",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(1700000005, 0)},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(1700000000, 0)},
			},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
	if pad > 0 {
		p.Annotations = map[string]string{"example.com/pad": strings.Repeat("p", pad)}
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// encode is obj as the apiserver writes it for protobuf: prefix, envelope, object.
func encode(t testing.TB, obj runtime.Object, gv schema.GroupVersion) []byte {
	t.Helper()
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(upstreamSerializer, gv), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// watchFrame is the bare WatchEvent a protobuf watch stream carries for one event,
// without the frame's length.
func watchFrame(t testing.TB, typ string, object []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := upstreamRawSerializer.Encode(&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: object}}, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// seedInputs are real encodings the fuzz tests start from: objects, lists, status,
// watch frames, and frames whose object is itself in an envelope.
func seedInputs(t testing.TB) [][]byte {
	pod := encode(t, testPod("a", 0), corev1.SchemeGroupVersion)
	bigPod := encode(t, testPod("b", 3000), corev1.SchemeGroupVersion)
	list := encode(t, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []corev1.Pod{*testPod("a", 0), *testPod("c", 10)}}, corev1.SchemeGroupVersion)
	status := encode(t, &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"}, metav1.SchemeGroupVersion)
	deploy := encode(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: ptr[int32](3)}}, appsv1.SchemeGroupVersion)
	inputs := [][]byte{pod, bigPod, list, status, deploy,
		watchFrame(t, "ADDED", pod), watchFrame(t, "MODIFIED", bigPod), watchFrame(t, "BOOKMARK", pod),
		watchFrame(t, "ERROR", status), watchFrame(t, "SOMETHING", nil),
	}
	// A WatchEvent in an envelope, as a client asking the envelope serializer for one
	// would read it.
	inputs = append(inputs, append(bytes.Clone(Prefix), unknownMessage("v1", "WatchEvent", watchFrame(t, "ADDED", pod), "", "")...))
	// Envelopes upstream reads its own way: compressed, without Raw, empty.
	inputs = append(inputs,
		append(bytes.Clone(Prefix), unknownMessage("v1", "Pod", bareObject(t, pod), "gzip", "")...),
		append(bytes.Clone(Prefix), unknownMessage("v1", "Pod", nil, "", "application/json")...),
		bytes.Clone(Prefix), []byte("k8s"), nil,
	)
	// Envelopes whose kind is partial, wrong or unknown, for defaults and into to fill.
	podBody := bareObject(t, pod)
	for _, tm := range [][2]string{{"", "Pod"}, {"v1", ""}, {"", ""}, {"apps/v1", "Deployment"}, {"v1", "Nope"}, {"a/b/c", "Pod"}} {
		inputs = append(inputs, append(bytes.Clone(Prefix), unknownMessage(tm[0], tm[1], podBody, "", "")...))
	}
	for _, in := range [][]byte{pod, list, watchFrame(t, "ADDED", pod)} {
		for _, n := range []int{1, 5, 7, len(in) / 2, len(in) - 1} {
			inputs = append(inputs, bytes.Clone(in[:n]))
		}
	}
	return inputs
}

// unknownMessage hand-builds a runtime.Unknown (without the prefix); raw nil leaves
// Raw out.
func unknownMessage(apiVersion, kind string, raw []byte, contentEncoding, contentType string) []byte {
	tm := runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}
	u := runtime.Unknown{TypeMeta: tm, Raw: raw, ContentEncoding: contentEncoding, ContentType: contentType}
	data, err := u.Marshal()
	if err != nil {
		panic(fmt.Sprint("marshal unknown: ", err))
	}
	return data
}

// bareObject is the object inside an envelope.
func bareObject(t testing.TB, enveloped []byte) []byte {
	var u runtime.Unknown
	if err := u.Unmarshal(enveloped[len(Prefix):]); err != nil {
		t.Fatal(err)
	}
	return u.Raw
}
