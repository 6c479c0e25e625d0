package protodecode

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// The fuzz tests show the results equal upstream's; these show that the common
// inputs get them without upstream, which is the point of the package.
func TestCommonInputsSkipUpstream(t *testing.T) {
	pod := encode(t, testPod("a", 100), corev1.SchemeGroupVersion)
	list := encode(t, &corev1.PodList{Items: []corev1.Pod{*testPod("a", 0)}}, corev1.SchemeGroupVersion)
	envelope := NewSerializer(scheme.Scheme, upstreamSerializer)
	raw := NewRawSerializer(scheme.Scheme, upstreamRawSerializer)
	for _, tc := range []struct {
		name   string
		decode func() (runtime.Object, bool)
		want   bool
	}{
		{"pod", func() (runtime.Object, bool) { o, _, ok := envelope.decode(pod, nil, nil); return o, ok }, true},
		{"pod into pod", func() (runtime.Object, bool) { o, _, ok := envelope.decode(pod, nil, &corev1.Pod{}); return o, ok }, true},
		{"list into list", func() (runtime.Object, bool) { o, _, ok := envelope.decode(list, nil, &corev1.PodList{}); return o, ok }, true},
		{"watch frame", func() (runtime.Object, bool) {
			o, _, ok := raw.decode(watchFrame(t, "ADDED", pod), nil, &metav1.WatchEvent{})
			return o, ok
		}, true},
		{"into Unknown", func() (runtime.Object, bool) { o, _, ok := envelope.decode(pod, nil, &runtime.Unknown{}); return o, ok }, false},
		{"content encoding", func() (runtime.Object, bool) {
			in := append(bytes.Clone(Prefix), unknownMessage("v1", "Pod", []byte{}, "gzip", "")...)
			o, _, ok := envelope.decode(in, nil, nil)
			return o, ok
		}, false},
		{"no raw", func() (runtime.Object, bool) {
			o, _, ok := envelope.decode(append(bytes.Clone(Prefix), unknownMessage("v1", "Pod", nil, "", "")...), nil, nil)
			return o, ok
		}, false},
		{"truncated", func() (runtime.Object, bool) { o, _, ok := envelope.decode(pod[:len(pod)-3], nil, nil); return o, ok }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if obj, ok := tc.decode(); ok != tc.want {
				t.Errorf("decoded without upstream: %v, want %v (%T)", ok, tc.want, obj)
			}
		})
	}
}

// A watch frame's object is left in the frame: Object.Raw is the frame's own bytes,
// with no room to grow into the rest of the frame.
func TestWatchEventObjectIsNotCopied(t *testing.T) {
	pod := encode(t, testPod("a", 0), corev1.SchemeGroupVersion)
	frame := watchFrame(t, "MODIFIED", pod)
	var ev metav1.WatchEvent
	if _, _, err := NewRawSerializer(scheme.Scheme, upstreamRawSerializer).Decode(frame, nil, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "MODIFIED" || !bytes.Equal(ev.Object.Raw, pod) {
		t.Fatalf("decoded %q with %d bytes, want MODIFIED with the pod's %d", ev.Type, len(ev.Object.Raw), len(pod))
	}
	start := bytes.Index(frame, pod)
	if &ev.Object.Raw[0] != &frame[start] {
		t.Error("Object.Raw is a copy, want the frame's bytes")
	}
	if cap(ev.Object.Raw) != len(pod) {
		t.Errorf("Object.Raw has capacity %d, want %d: an append would overwrite the frame", cap(ev.Object.Raw), len(pod))
	}
}
