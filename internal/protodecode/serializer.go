// Package protodecode decodes the API's protobuf responses and watch events as
// apimachinery's protobuf serializers do, with the same objects, kinds and errors, but
// without copying an object's bytes out of its wrapping before unmarshalling them.
//
// Upstream, every watch event's object is copied twice before it is unmarshalled: the
// frame's metav1.WatchEvent copies Object.Raw out of the stream's buffer, and the
// runtime.Unknown envelope inside it copies Raw again. A list response's envelope
// copies the whole list once. Here both wrappers are read with protowire and the
// object is unmarshalled straight from the input. Anything unusual (decoding into a
// *runtime.Unknown, a content encoding, an envelope without an object, input these
// parsers do not accept, and every error) is handed to the upstream serializer, so
// that it behaves exactly as upstream does.
package protodecode

import (
	"bytes"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/recognizer"
)

// Prefix starts every envelope: "k8s", then 0 for "a runtime.Unknown follows".
var Prefix = []byte("k8s\x00")

// Serializer is apimachinery's protobuf.Serializer (prefix and runtime.Unknown
// envelope) with a decoder that does not copy the envelope's Raw. Its results never
// share memory with the input: the object is unmarshalled by its generated Unmarshal,
// which copies every string and bytes field it reads.
type Serializer struct {
	upstream *protobuf.Serializer
	kinds    kindResolver
}

var (
	_ runtime.Serializer            = (*Serializer)(nil)
	_ runtime.EncoderWithAllocator  = (*Serializer)(nil)
	_ recognizer.RecognizingDecoder = (*Serializer)(nil)
)

// NewSerializer decodes for upstream, which must be apimachinery's protobuf serializer
// over scheme, and hands it everything else.
func NewSerializer(scheme *runtime.Scheme, upstream *protobuf.Serializer) *Serializer {
	return &Serializer{upstream: upstream, kinds: kindResolver{typer: scheme, creater: scheme}}
}

// Decode decodes data as upstream's Decode does.
func (s *Serializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if obj, gvk, ok := s.decode(data, defaults, into); ok {
		return obj, gvk, nil
	}
	return s.upstream.Decode(data, defaults, into)
}

// decode is Decode when it succeeds without upstream; ok is false otherwise.
func (s *Serializer) decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (obj runtime.Object, gvk *schema.GroupVersionKind, ok bool) {
	if _, isUnknown := into.(*runtime.Unknown); isUnknown {
		// Upstream answers with the envelope itself.
		return nil, nil, false
	}
	body, found := bytes.CutPrefix(data, Prefix)
	if !found {
		return nil, nil, false
	}
	env, parsed := parseEnvelope(body)
	if !parsed || env.raw == nil || env.encoded {
		return nil, nil, false
	}
	actual := env.typeMeta.GroupVersionKind()
	return s.kinds.decode(actual, defaults, into, env.raw, unmarshal)
}

// Encode is upstream's.
func (s *Serializer) Encode(obj runtime.Object, w io.Writer) error { return s.upstream.Encode(obj, w) }

// EncodeWithAllocator is upstream's.
func (s *Serializer) EncodeWithAllocator(obj runtime.Object, w io.Writer, memAlloc runtime.MemoryAllocator) error {
	return s.upstream.EncodeWithAllocator(obj, w, memAlloc)
}

// Identifier is upstream's, so that encodings cached for it are shared.
func (s *Serializer) Identifier() runtime.Identifier { return s.upstream.Identifier() }

// RecognizesData is upstream's.
func (s *Serializer) RecognizesData(data []byte) (ok, unknown bool, err error) {
	return s.upstream.RecognizesData(data)
}

// RawSerializer is apimachinery's protobuf.RawSerializer, which reads and writes the
// frames of a protobuf watch stream (each a bare metav1.WatchEvent, no prefix or
// envelope), with a decoder that does not copy a WatchEvent's Object.Raw: decoded into
// a *metav1.WatchEvent, Object.Raw is a sub-slice of the input.
//
// That is safe only as client-go uses it. The streaming decoder reads each frame into
// one buffer it reuses for the next, and client-go's rest/watch.Decoder decodes the
// event's object from Object.Raw before it asks for the next frame, then drops the
// WatchEvent. The object it keeps is unmarshalled by its generated (gogo) Unmarshal,
// which copies every string and bytes field out of its input, so nothing it returns
// points into the buffer. The type, which it does keep, is a constant or a copy. If
// either stopped being true, events kept by a watcher would change under it when later
// frames arrived; TestWatchThroughClientGo checks that they do not.
type RawSerializer struct {
	upstream *protobuf.RawSerializer
	kinds    kindResolver
}

var (
	_ runtime.Serializer           = (*RawSerializer)(nil)
	_ runtime.EncoderWithAllocator = (*RawSerializer)(nil)
)

// NewRawSerializer decodes for upstream, which must be apimachinery's raw protobuf
// serializer over scheme, and hands it everything else.
func NewRawSerializer(scheme *runtime.Scheme, upstream *protobuf.RawSerializer) *RawSerializer {
	return &RawSerializer{upstream: upstream, kinds: kindResolver{typer: scheme, creater: scheme}}
}

// Decode decodes data as upstream's Decode does, except that a WatchEvent's
// Object.Raw is not copied.
func (s *RawSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if obj, gvk, ok := s.decode(data, defaults, into); ok {
		return obj, gvk, nil
	}
	return s.upstream.Decode(data, defaults, into)
}

func (s *RawSerializer) decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (obj runtime.Object, gvk *schema.GroupVersionKind, ok bool) {
	if into == nil || len(data) == 0 {
		return nil, nil, false
	}
	if _, isUnknown := into.(*runtime.Unknown); isUnknown {
		return nil, nil, false
	}
	return s.kinds.decode(schema.GroupVersionKind{}, defaults, into, data, unmarshalAliasingEvents)
}

// Encode is upstream's.
func (s *RawSerializer) Encode(obj runtime.Object, w io.Writer) error {
	return s.upstream.Encode(obj, w)
}

// EncodeWithAllocator is upstream's.
func (s *RawSerializer) EncodeWithAllocator(obj runtime.Object, w io.Writer, memAlloc runtime.MemoryAllocator) error {
	return s.upstream.EncodeWithAllocator(obj, w, memAlloc)
}

// Identifier is upstream's.
func (s *RawSerializer) Identifier() runtime.Identifier { return s.upstream.Identifier() }

// kindResolver settles which object to decode into and the kind to report, as the
// upstream protobuf serializers do.
type kindResolver struct {
	typer   runtime.ObjectTyper
	creater runtime.ObjectCreater
}

// unmarshalFunc resets obj and unmarshals body into it, reporting whether it could.
type unmarshalFunc func(obj runtime.Object, body []byte) bool

// decode unmarshals body, whose wrapping declared the kind actual, into into or a new
// object of the kind, with defaults filling what actual lacks and then into's own
// kind what is still missing. ok is false wherever upstream would fail, and wherever
// unmarshal could not, so that upstream decodes again and reports its own error.
func (r kindResolver) decode(actual schema.GroupVersionKind, defaults *schema.GroupVersionKind, into runtime.Object, body []byte, unmarshal unmarshalFunc) (obj runtime.Object, gvk *schema.GroupVersionKind, ok bool) {
	if defaults != nil {
		fillKind(&actual, *defaults)
	}
	if into != nil {
		kinds, _, err := r.typer.ObjectKinds(into)
		switch {
		case runtime.IsNotRegisteredError(err):
			// A protobuf message the scheme does not know: decoded as it is, and
			// the kind reported as the input and defaults said.
			if !unmarshal(into, body) {
				return nil, nil, false
			}
			return into, &actual, true
		case err != nil:
			return nil, nil, false
		}
		fillKind(&actual, kinds[0])
	}
	if actual.Kind == "" || actual.Version == "" {
		// Upstream fails for want of a kind or version, and reports the kind itself.
		return nil, nil, false
	}
	obj, err := runtime.UseOrCreateObject(r.typer, r.creater, actual, into)
	if err != nil || !unmarshal(obj, body) {
		return nil, nil, false
	}
	obj.GetObjectKind().SetGroupVersionKind(actual)
	return obj, &actual, true
}

// fillKind fills what dst lacks from src: the kind, and group and version together
// when dst has no version and src has one.
func fillKind(dst *schema.GroupVersionKind, src schema.GroupVersionKind) {
	if dst.Kind == "" {
		dst.Kind = src.Kind
	}
	if dst.Version == "" && src.Version != "" {
		dst.Group, dst.Version = src.Group, src.Version
	}
}

// message is what a generated protobuf type offers for decoding.
type message interface {
	Reset()
	Unmarshal([]byte) error
}

// unmarshal is the generated Unmarshal, after a Reset.
func unmarshal(obj runtime.Object, body []byte) bool {
	m, ok := obj.(message)
	if !ok {
		return false
	}
	m.Reset()
	return m.Unmarshal(body) == nil
}

// unmarshalAliasingEvents is unmarshal, except that a WatchEvent's Object.Raw is
// left in body rather than copied.
func unmarshalAliasingEvents(obj runtime.Object, body []byte) bool {
	ev, ok := obj.(*metav1.WatchEvent)
	if !ok {
		return unmarshal(obj, body)
	}
	*ev = metav1.WatchEvent{}
	return parseWatchEvent(body, ev)
}
