package protodecode

import (
	"encoding/binary"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// endlessStream repeats one stream's bytes for ever.
type endlessStream struct {
	data []byte
	off  int
}

func (s *endlessStream) Read(p []byte) (int, error) {
	n := copy(p, s.data[s.off:])
	s.off = (s.off + n) % len(s.data)
	return n, nil
}

func (s *endlessStream) Close() error { return nil }

// BenchmarkDecodeWatchEvent decodes one pod's MODIFIED event per iteration through
// client-go's own watch path (frame reader, streaming decoder, rest/watch.Decoder),
// with the serializers client-go's clientset negotiates and with this package's.
func BenchmarkDecodeWatchEvent(b *testing.B) {
	frame := watchFrame(b, "MODIFIED", encode(b, testPod("web-5d4f8b9c7-x2x9z", 0), corev1.SchemeGroupVersion))
	stream := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	stream = append(stream, frame...)
	for _, bc := range []struct {
		name       string
		serializer runtime.NegotiatedSerializer
	}{
		{"upstream", scheme.Codecs.WithoutConversion()},
		{"protodecode", NegotiatedSerializer()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			negotiator := runtime.NewClientNegotiator(bc.serializer, corev1.SchemeGroupVersion)
			objects, frames, framer, err := negotiator.StreamDecoder("application/vnd.kubernetes.protobuf", nil)
			if err != nil {
				b.Fatal(err)
			}
			events := restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(&endlessStream{data: stream}), frames), objects)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if _, obj, err := events.Decode(); err != nil || obj.(*corev1.Pod).Name == "" {
					b.Fatal(obj, err)
				}
			}
		})
	}
}
