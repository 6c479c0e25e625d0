package v1

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The protobuf wire format of these types, field for field as upstream's
// apiregistration/v1 generated.proto numbers them, so that clients sending
// application/vnd.kubernetes.protobuf (the aggregator clientset, e2e's clients) can
// create and read APIServices. The apimachinery protobuf serializer needs Marshal,
// Unmarshal and Reset; nested messages are written length-delimited, scalar fields
// that are not pointers always, as upstream's generated code writes them.

// Marshal encodes the APIService.
func (in *APIService) Marshal() ([]byte, error) {
	meta, err := in.ObjectMeta.Marshal()
	if err != nil {
		return nil, err
	}
	b := appendBytes(nil, 1, meta)
	b = appendBytes(b, 2, in.Spec.marshal())
	status, err := in.Status.marshal()
	if err != nil {
		return nil, err
	}
	return appendBytes(b, 3, status), nil
}

// Unmarshal decodes an APIService, replacing what in held.
func (in *APIService) Unmarshal(data []byte) error {
	in.Reset()
	return eachField(data, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			return in.ObjectMeta.Unmarshal(v)
		case 2:
			return in.Spec.unmarshal(v)
		case 3:
			return in.Status.unmarshal(v)
		}
		return nil
	})
}

// Reset clears the APIService.
func (in *APIService) Reset() { *in = APIService{} }

// Marshal encodes the list.
func (in *APIServiceList) Marshal() ([]byte, error) {
	meta, err := in.ListMeta.Marshal()
	if err != nil {
		return nil, err
	}
	b := appendBytes(nil, 1, meta)
	for i := range in.Items {
		item, err := in.Items[i].Marshal()
		if err != nil {
			return nil, err
		}
		b = appendBytes(b, 2, item)
	}
	return b, nil
}

// Unmarshal decodes a list, replacing what in held.
func (in *APIServiceList) Unmarshal(data []byte) error {
	in.Reset()
	return eachField(data, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			return in.ListMeta.Unmarshal(v)
		case 2:
			var item APIService
			if err := item.Unmarshal(v); err != nil {
				return err
			}
			in.Items = append(in.Items, item)
		}
		return nil
	})
}

// Reset clears the list.
func (in *APIServiceList) Reset() { *in = APIServiceList{} }

func (in *APIServiceSpec) marshal() []byte {
	var b []byte
	if in.Service != nil {
		b = appendBytes(b, 1, in.Service.marshal())
	}
	b = appendBytes(b, 2, []byte(in.Group))
	b = appendBytes(b, 3, []byte(in.Version))
	b = appendVarint(b, 4, protowire.EncodeBool(in.InsecureSkipTLSVerify))
	if in.CABundle != nil {
		b = appendBytes(b, 5, in.CABundle)
	}
	b = appendVarint(b, 7, uint64(in.GroupPriorityMinimum))
	return appendVarint(b, 8, uint64(in.VersionPriority))
}

func (in *APIServiceSpec) unmarshal(data []byte) error {
	return eachField(data, func(num protowire.Number, v []byte, n uint64) error {
		switch num {
		case 1:
			in.Service = &ServiceReference{}
			return in.Service.unmarshal(v)
		case 2:
			in.Group = string(v)
		case 3:
			in.Version = string(v)
		case 4:
			in.InsecureSkipTLSVerify = n != 0
		case 5:
			in.CABundle = append([]byte{}, v...)
		case 7:
			in.GroupPriorityMinimum = int32(n)
		case 8:
			in.VersionPriority = int32(n)
		}
		return nil
	})
}

func (in *ServiceReference) marshal() []byte {
	b := appendBytes(nil, 1, []byte(in.Namespace))
	b = appendBytes(b, 2, []byte(in.Name))
	if in.Port != nil {
		b = appendVarint(b, 3, uint64(*in.Port))
	}
	return b
}

func (in *ServiceReference) unmarshal(data []byte) error {
	return eachField(data, func(num protowire.Number, v []byte, n uint64) error {
		switch num {
		case 1:
			in.Namespace = string(v)
		case 2:
			in.Name = string(v)
		case 3:
			port := int32(n)
			in.Port = &port
		}
		return nil
	})
}

func (in *APIServiceStatus) marshal() ([]byte, error) {
	var b []byte
	for _, c := range in.Conditions {
		cond, err := c.marshal()
		if err != nil {
			return nil, err
		}
		b = appendBytes(b, 1, cond)
	}
	return b, nil
}

func (in *APIServiceStatus) unmarshal(data []byte) error {
	return eachField(data, func(num protowire.Number, v []byte, _ uint64) error {
		if num == 1 {
			var c APIServiceCondition
			if err := c.unmarshal(v); err != nil {
				return err
			}
			in.Conditions = append(in.Conditions, c)
		}
		return nil
	})
}

func (in *APIServiceCondition) marshal() ([]byte, error) {
	t, err := in.LastTransitionTime.Marshal()
	if err != nil {
		return nil, err
	}
	b := appendBytes(nil, 1, []byte(in.Type))
	b = appendBytes(b, 2, []byte(in.Status))
	b = appendBytes(b, 3, t)
	b = appendBytes(b, 4, []byte(in.Reason))
	return appendBytes(b, 5, []byte(in.Message)), nil
}

func (in *APIServiceCondition) unmarshal(data []byte) error {
	return eachField(data, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1:
			in.Type = APIServiceConditionType(v)
		case 2:
			in.Status = ConditionStatus(v)
		case 3:
			in.LastTransitionTime = metav1.Time{}
			return in.LastTransitionTime.Unmarshal(v)
		case 4:
			in.Reason = string(v)
		case 5:
			in.Message = string(v)
		}
		return nil
	})
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// eachField calls f with every field of a message: a length-delimited field's bytes in
// v, a varint's value in n. Other wire types are skipped, as unknown fields are.
func eachField(data []byte, f func(num protowire.Number, v []byte, n uint64) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("apiregistration/v1: %w", protowire.ParseError(n))
		}
		data = data[n:]
		var err error
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(data)
			if m < 0 {
				return fmt.Errorf("apiregistration/v1: field %d: %w", num, protowire.ParseError(m))
			}
			err, n = f(num, v, 0), m
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(data)
			if m < 0 {
				return fmt.Errorf("apiregistration/v1: field %d: %w", num, protowire.ParseError(m))
			}
			err, n = f(num, nil, v), m
		default:
			n = protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return fmt.Errorf("apiregistration/v1: field %d: %w", num, protowire.ParseError(n))
			}
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
