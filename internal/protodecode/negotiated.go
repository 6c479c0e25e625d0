package protodecode

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// negotiatedSerializer is the serializer set a generated client-go client uses, with
// the protobuf media type's serializers decoding through this package.
type negotiatedSerializer struct {
	runtime.NegotiatedSerializer
	mediaTypes []runtime.SerializerInfo
}

// NegotiatedSerializer is what client-go's generated clients negotiate with
// (rest.CodecFactoryForGeneratedClient over client-go's scheme, without conversion),
// except that application/vnd.kubernetes.protobuf's Serializer and its stream's
// Serializer are this package's. Every other media type, and all encoding, is as
// upstream.
func NegotiatedSerializer() runtime.NegotiatedSerializer {
	base := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	mediaTypes := slices.Clone(base.SupportedMediaTypes())
	for i := range mediaTypes {
		info := &mediaTypes[i]
		if info.MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		if upstream, ok := info.Serializer.(*protobuf.Serializer); ok {
			info.Serializer = NewSerializer(scheme.Scheme, upstream)
		}
		if info.StreamSerializer == nil {
			continue
		}
		if upstream, ok := info.StreamSerializer.Serializer.(*protobuf.RawSerializer); ok {
			// A copy: the factory's own info is shared with every other client.
			stream := *info.StreamSerializer
			stream.Serializer = NewRawSerializer(scheme.Scheme, upstream)
			info.StreamSerializer = &stream
		}
	}
	return &negotiatedSerializer{NegotiatedSerializer: base, mediaTypes: mediaTypes}
}

func (n *negotiatedSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return n.mediaTypes
}
