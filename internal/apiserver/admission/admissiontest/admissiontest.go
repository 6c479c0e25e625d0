// Package admissiontest is an in-memory admission.Reader and StatusWriter for plugin
// unit tests.
package admissiontest

import (
	"context"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Store holds objects by resource, namespace and name.
type Store struct {
	mu   sync.Mutex
	objs map[schema.GroupVersionResource]map[string]runtime.Object
	rv   int
}

// New returns a store holding objs; their resources are derived from their kinds.
func New(objs ...runtime.Object) *Store {
	s := &Store{objs: map[schema.GroupVersionResource]map[string]runtime.Object{}}
	for _, o := range objs {
		s.Add(o)
	}
	return s
}

// ResourceOf names the resource of a typed object of client-go's scheme.
func ResourceOf(obj runtime.Object) schema.GroupVersionResource {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		panic(err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	return gvr
}

// Add stores obj (replacing one of the same name).
func (s *Store) Add(obj runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gvr := ResourceOf(obj)
	if s.objs[gvr] == nil {
		s.objs[gvr] = map[string]runtime.Object{}
	}
	acc, _ := meta.Accessor(obj)
	s.rv++
	acc.SetResourceVersion(strconv.Itoa(s.rv))
	s.objs[gvr][acc.GetNamespace()+"/"+acc.GetName()] = obj.DeepCopyObject()
}

func (s *Store) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.objs[gvr][namespace+"/"+name]; ok {
		return o.DeepCopyObject(), nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func (s *Store) List(_ context.Context, gvr schema.GroupVersionResource, namespace string) ([]runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runtime.Object
	for _, o := range s.objs[gvr] {
		acc, _ := meta.Accessor(o)
		if namespace == "" || acc.GetNamespace() == namespace {
			out = append(out, o.DeepCopyObject())
		}
	}
	return out, nil
}

// UpdateStatus replaces the object with what update makes of it, atomically.
func (s *Store) UpdateStatus(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, update func(runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	cur, ok := s.objs[gvr][key]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	obj, err := update(cur.DeepCopyObject())
	if err != nil {
		return nil, err
	}
	s.rv++
	acc, _ := meta.Accessor(obj)
	acc.SetResourceVersion(strconv.Itoa(s.rv))
	s.objs[gvr][key] = obj.DeepCopyObject()
	return obj, nil
}
