package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime"
)

// protoMagic prefixes values stored as protobuf; anything else is JSON. The type is
// known from the key's resource, so no envelope is needed.
var protoMagic = []byte("\x00mz1")

// protoMessage is implemented by the generated k8s.io/api types.
type protoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// sizedProtoMessage is what the generated types also have: their size, and a marshal
// into a buffer of exactly that size (from its end).
type sizedProtoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// Encode serializes obj for storage: protobuf when the type has it (smaller and several
// times faster to decode), JSON otherwise.
func Encode(obj runtime.Object) ([]byte, error) {
	if sm, ok := obj.(sizedProtoMessage); ok {
		// One allocation, the magic and the message in place, rather than the
		// message's own and a copy behind the magic: every write encodes.
		size := sm.Size()
		data := make([]byte, len(protoMagic)+size)
		copy(data, protoMagic)
		n, err := sm.MarshalToSizedBuffer(data[len(protoMagic):])
		if err != nil {
			return nil, err
		}
		if n != size {
			return nil, fmt.Errorf("encoding %T: %d bytes marshalled, its size is %d", obj, n, size)
		}
		return data, nil
	}
	if pm, ok := obj.(protoMessage); ok {
		data, err := pm.Marshal()
		if err != nil {
			return nil, err
		}
		return append(append(make([]byte, 0, len(protoMagic)+len(data)), protoMagic...), data...), nil
	}
	return json.Marshal(obj)
}

// Decode fills into (a new, empty object of the stored type) from a stored value.
func Decode(data []byte, into runtime.Object) error {
	if bytes.HasPrefix(data, protoMagic) {
		pm, ok := into.(protoMessage)
		if !ok {
			return fmt.Errorf("stored value is protobuf but %T has no protobuf form", into)
		}
		return pm.Unmarshal(data[len(protoMagic):])
	}
	return json.Unmarshal(data, into)
}

// bytesString is data as a string without a copy, for the etcd client's puts (which
// copy it into their request): data is an encoding no one changes afterwards.
func bytesString(data []byte) string { return unsafe.String(unsafe.SliceData(data), len(data)) }
