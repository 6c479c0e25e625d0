package fieldmanager

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/registry"
)

// convertor is the runtime.ObjectConvertor the field managers use. mizzen has no
// internal versions: an object converts to its own version as itself (no copy: the
// library only reads what it converts, or converts something it made), and to another
// version only where the registry serves one kind from another's storage
// (events.k8s.io Events are core Events, autoscaling/v1 HPAs are v2 ones). Any other
// target is "not registered", which makes the library skip managers of versions it
// cannot compare, as upstream does for versions no longer served.
type convertor struct {
	scheme     *runtime.Scheme
	viaStorage map[schema.GroupVersionKind]storageConversion
}

// storageConversion converts a served kind to and from the kind it is stored as.
type storageConversion struct {
	storage  schema.GroupVersionKind
	to, from func(runtime.Object) (runtime.Object, error)
}

var _ runtime.ObjectConvertor = (*convertor)(nil)

func newConvertor(scheme *runtime.Scheme, resources []*registry.Resource) *convertor {
	c := &convertor{scheme: scheme, viaStorage: map[schema.GroupVersionKind]storageConversion{}}
	stored := map[schema.GroupResource]schema.GroupVersionKind{}
	for _, r := range resources {
		if r.StorageResource == nil {
			gr := r.GroupVersionResource().GroupResource()
			if _, ok := stored[gr]; !ok {
				stored[gr] = r.GroupVersionKind()
			}
		}
	}
	for _, r := range resources {
		if r.StorageResource == nil || r.ToStorage == nil || r.FromStorage == nil {
			continue
		}
		if s, ok := stored[*r.StorageResource]; ok {
			c.viaStorage[r.GroupVersionKind()] = storageConversion{storage: s, to: r.ToStorage, from: r.FromStorage}
		}
	}
	return c
}

func (c *convertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gv, ok := target.(schema.GroupVersion)
	if !ok {
		return c.scheme.ConvertToVersion(in, target)
	}
	obj, err := c.typed(in)
	if err != nil {
		return nil, err
	}
	from := obj.GetObjectKind().GroupVersionKind()
	if from.GroupVersion() == gv {
		return obj, nil
	}
	to := gv.WithKind(from.Kind)
	storedGVK := from
	if conv, ok := c.viaStorage[from]; ok {
		if obj, err = conv.to(obj); err != nil {
			return nil, err
		}
		storedGVK = conv.storage
	}
	switch conv, ok := c.viaStorage[to]; {
	case to == storedGVK:
	case ok && conv.storage == storedGVK:
		if obj, err = conv.from(obj); err != nil {
			return nil, err
		}
	default:
		return nil, runtime.NewNotRegisteredGVKErrForTarget(c.scheme.Name(), from, target)
	}
	obj.GetObjectKind().SetGroupVersionKind(to)
	return obj, nil
}

// typed returns in as its Go type with its kind set: unstructured content is decoded
// into a new object.
func (c *convertor) typed(in runtime.Object) (runtime.Object, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		obj, err := c.scheme.New(gvk)
		if err != nil {
			return nil, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), obj); err != nil {
			return nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return obj, nil
	}
	if in.GetObjectKind().GroupVersionKind().Empty() {
		kinds, _, err := c.scheme.ObjectKinds(in)
		if err != nil {
			return nil, err
		}
		in.GetObjectKind().SetGroupVersionKind(kinds[0])
	}
	return in, nil
}

func (c *convertor) Convert(in, out, context interface{}) error {
	return c.scheme.Convert(in, out, context)
}

func (c *convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return c.scheme.ConvertFieldLabel(gvk, label, value)
}
