package protodecode

import (
	"bytes"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// decoder is the one method both sides of a comparison share.
type decoder interface {
	Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error)
}

// intos are what callers decode into: nothing (the kind decides), registered types,
// the watch event, and a protobuf message the scheme does not know.
var intos = map[string]func() runtime.Object{
	"nil":        func() runtime.Object { return nil },
	"Pod":        func() runtime.Object { return &corev1.Pod{} },
	"PodList":    func() runtime.Object { return &corev1.PodList{} },
	"WatchEvent": func() runtime.Object { return &metav1.WatchEvent{} },
	"Table":      func() runtime.Object { return &metav1.Table{} },
}

// defaultKinds are the defaults callers pass: none, full ones, and partial ones.
var defaultKinds = []*schema.GroupVersionKind{
	nil,
	{Version: "v1", Kind: "Pod"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Kind: "Pod"},
	{Version: "v1"},
}

// sameDecoding fails t unless ours decodes data exactly as upstream does, for every
// into and defaults: the same error (message and all) or none, the same object and
// kind, into left in the same state, and data untouched.
func sameDecoding(t *testing.T, ours, upstream decoder, data []byte) {
	for name, newInto := range intos {
		for _, defaults := range defaultKinds {
			ourData, upData := bytes.Clone(data), bytes.Clone(data)
			ourInto, upInto := newInto(), newInto()
			ourObj, ourGVK, ourErr := ours.Decode(ourData, defaults, ourInto)
			upObj, upGVK, upErr := upstream.Decode(upData, defaults, upInto)
			if (ourErr == nil) != (upErr == nil) || (ourErr != nil && ourErr.Error() != upErr.Error()) {
				t.Fatalf("into %s, defaults %v: error %v, upstream's %v", name, defaults, ourErr, upErr)
			}
			if !reflect.DeepEqual(ourGVK, upGVK) {
				t.Fatalf("into %s, defaults %v: kind %v, upstream's %v", name, defaults, ourGVK, upGVK)
			}
			if !reflect.DeepEqual(ourObj, upObj) {
				t.Fatalf("into %s, defaults %v: object\n%#v\nupstream's\n%#v", name, defaults, ourObj, upObj)
			}
			if !reflect.DeepEqual(ourInto, upInto) {
				t.Fatalf("into %s, defaults %v: into left as\n%#v\nupstream leaves\n%#v", name, defaults, ourInto, upInto)
			}
			if !bytes.Equal(ourData, data) {
				t.Fatalf("into %s, defaults %v: the input was modified", name, defaults)
			}
		}
	}
}

func FuzzSerializer(f *testing.F) {
	for _, in := range seedInputs(f) {
		f.Add(in)
	}
	ours := NewSerializer(scheme.Scheme, upstreamSerializer)
	f.Fuzz(func(t *testing.T, data []byte) {
		sameDecoding(t, ours, upstreamSerializer, data)
	})
}

func FuzzRawSerializer(f *testing.F) {
	for _, in := range seedInputs(f) {
		f.Add(in)
		// A watch frame's object, bare, as a raw decoder into Pod would see it.
		if body, ok := bytes.CutPrefix(in, Prefix); ok {
			if env, ok := parseEnvelope(body); ok && env.raw != nil {
				f.Add(bytes.Clone(env.raw))
			}
		}
	}
	ours := NewRawSerializer(scheme.Scheme, upstreamRawSerializer)
	f.Fuzz(func(t *testing.T, data []byte) {
		sameDecoding(t, ours, upstreamRawSerializer, data)
	})
}
