package protodecode

import (
	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Field numbers of the messages read here (apimachinery's generated.proto files).
const (
	unknownTypeMeta        protowire.Number = 1
	unknownRaw             protowire.Number = 2
	unknownContentEncoding protowire.Number = 3
	unknownContentType     protowire.Number = 4

	typeMetaAPIVersion protowire.Number = 1
	typeMetaKind       protowire.Number = 2

	watchEventType   protowire.Number = 1
	watchEventObject protowire.Number = 2

	rawExtensionRaw protowire.Number = 1
)

// The parsers below accept a subset of what gogo's generated Unmarshal methods
// accept, and read it the same way: the fields in order, the last value of a repeated
// scalar winning, a repeated message merged into the one before, unknown fields
// skipped. Where they are stricter (protowire rejects 10-byte varints that overflow,
// field numbers past int32, mismatched or too deeply nested groups, all of which gogo
// lets through) they report false and the caller hands the input to upstream, so the
// difference is never seen. What they must never do is accept what gogo rejects: a
// known field with the wrong wire type is therefore a failure, not an unknown field.

// EachField calls visit with each field of message b in order: its number, wire
// type and, for a length-delimited field, its value (a sub-slice of b). It reports
// false if b does not parse or visit returns false.
func EachField(b []byte, visit func(num protowire.Number, typ protowire.Type, value []byte) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		var value []byte
		if typ == protowire.BytesType {
			value, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return false
		}
		b = b[n:]
		if !visit(num, typ, value) {
			return false
		}
	}
	return true
}

// envelope is a runtime.Unknown as this package needs it.
type envelope struct {
	typeMeta runtime.TypeMeta
	// raw is the object's bytes, a sub-slice of the input; nil when absent.
	raw []byte
	// encoded says ContentEncoding is set.
	encoded bool
}

// parseEnvelope reads the runtime.Unknown message b (after the "k8s\x00" prefix).
func parseEnvelope(b []byte) (env envelope, ok bool) {
	ok = EachField(b, func(num protowire.Number, typ protowire.Type, value []byte) bool {
		switch num {
		case unknownTypeMeta:
			return typ == protowire.BytesType && parseTypeMeta(value, &env.typeMeta)
		case unknownRaw:
			if typ != protowire.BytesType {
				return false
			}
			// Capped, so that an append to it can never write over the input after it.
			env.raw = value[:len(value):len(value)]
		case unknownContentEncoding:
			if typ != protowire.BytesType {
				return false
			}
			env.encoded = len(value) > 0
		case unknownContentType:
			// Read by upstream only to answer into a *runtime.Unknown, which it does itself.
			return typ == protowire.BytesType
		}
		return true
	})
	return env, ok
}

// parseTypeMeta merges the runtime.TypeMeta message b into tm.
func parseTypeMeta(b []byte, tm *runtime.TypeMeta) bool {
	return EachField(b, func(num protowire.Number, typ protowire.Type, value []byte) bool {
		switch num {
		case typeMetaAPIVersion:
			if typ != protowire.BytesType {
				return false
			}
			tm.APIVersion = string(value)
		case typeMetaKind:
			if typ != protowire.BytesType {
				return false
			}
			tm.Kind = string(value)
		}
		return true
	})
}

// parseWatchEvent merges the metav1.WatchEvent message b into ev. Unlike the
// generated Unmarshal, ev.Object.Raw is a sub-slice of b, not a copy: see
// RawSerializer for when that is safe.
func parseWatchEvent(b []byte, ev *metav1.WatchEvent) bool {
	return EachField(b, func(num protowire.Number, typ protowire.Type, value []byte) bool {
		switch num {
		case watchEventType:
			if typ != protowire.BytesType {
				return false
			}
			ev.Type = eventType(value)
		case watchEventObject:
			return typ == protowire.BytesType && parseRawExtension(value, &ev.Object)
		}
		return true
	})
}

// parseRawExtension merges the runtime.RawExtension message b into ext, its Raw a
// sub-slice of b.
func parseRawExtension(b []byte, ext *runtime.RawExtension) bool {
	return EachField(b, func(num protowire.Number, typ protowire.Type, value []byte) bool {
		if num != rawExtensionRaw {
			return true
		}
		if typ != protowire.BytesType {
			return false
		}
		ext.Raw = value[:len(value):len(value)]
		return true
	})
}

// eventType is b as a string. The event types the API defines come back as constants,
// with no allocation; anything else is copied (never aliased: the caller keeps the
// type after the input is reused).
func eventType(b []byte) string {
	switch string(b) {
	case string(watch.Added):
		return string(watch.Added)
	case string(watch.Modified):
		return string(watch.Modified)
	case string(watch.Deleted):
		return string(watch.Deleted)
	case string(watch.Bookmark):
		return string(watch.Bookmark)
	case string(watch.Error):
		return string(watch.Error)
	}
	return string(b)
}
