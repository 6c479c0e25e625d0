package fieldmanager

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/registry"
)

// objectMetaModel is the definition custom resource schemas point their metadata at.
const objectMetaModel = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// customKind is what the field managers know of one custom resource kind.
type customKind struct {
	tc        managedfields.TypeConverter
	hasStatus bool
	defaulter func(runtime.Object)
	// versions lists the served versions of the kind's group, between which objects
	// convert by their apiVersion only (conversion None).
	versions map[string]bool
}

// SetCustom registers the kinds a CustomResourceDefinition serves (one Resource per
// version) with the schemas of their objects (OpenAPI v3, keyed by definition name,
// with x-kubernetes-group-version-kind; ObjectMeta is added here). It replaces what
// was registered for those kinds before.
func (m *Managers) SetCustom(resources []*registry.Resource, models map[string]*spec.Schema) {
	all := map[string]*spec.Schema{}
	for k, v := range models {
		all[k] = v
	}
	for k, v := range m.metaModels() {
		all[k] = v
	}
	tc, err := managedfields.NewTypeConverter(all, false)
	if err != nil {
		m.log.Warn("custom resource schema does not convert for server-side apply; fields are deduced", "err", err)
		tc = managedfields.NewDeducedTypeConverter()
	}
	versions := map[string]bool{}
	for _, r := range resources {
		versions[r.GroupVersion.Version] = true
	}
	m.customMu.Lock()
	defer m.customMu.Unlock()
	for _, r := range resources {
		ck := &customKind{tc: tc, hasStatus: r.HasStatus, versions: versions}
		if r.Strategy != nil {
			ck.defaulter = r.Strategy.Default
		}
		m.custom[r.GroupVersionKind()] = ck
	}
	m.dropManagers(resources)
}

// RemoveCustom forgets custom resource kinds.
func (m *Managers) RemoveCustom(kinds []schema.GroupVersionKind) {
	m.customMu.Lock()
	for _, k := range kinds {
		delete(m.custom, k)
	}
	m.customMu.Unlock()
	m.mu.Lock()
	for key := range m.managers {
		for _, k := range kinds {
			if key.gvk == k {
				delete(m.managers, key)
			}
		}
	}
	m.mu.Unlock()
}

func (m *Managers) dropManagers(resources []*registry.Resource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.managers {
		for _, r := range resources {
			if key.gvk == r.GroupVersionKind() {
				delete(m.managers, key)
			}
		}
	}
}

func (m *Managers) customKind(gvk schema.GroupVersionKind) *customKind {
	m.customMu.RLock()
	defer m.customMu.RUnlock()
	return m.custom[gvk]
}

// metaModels is ObjectMeta's definition and every definition it refers to, taken
// from the built-in models once.
func (m *Managers) metaModels() map[string]*spec.Schema {
	m.metaOnce.Do(func() {
		models, err := m.models()
		if err != nil {
			m.log.Error("building the ObjectMeta models", "err", err)
			return
		}
		m.meta = map[string]*spec.Schema{}
		var visit func(name string)
		visit = func(name string) {
			if _, done := m.meta[name]; done {
				return
			}
			s := models[name]
			if s == nil {
				return
			}
			m.meta[name] = s
			walkRefs(s, visit)
		}
		visit(objectMetaModel)
	})
	return m.meta
}

func walkRefs(s *spec.Schema, visit func(string)) {
	if s == nil {
		return
	}
	if ref := s.Ref.String(); ref != "" {
		visit(ref[strings.LastIndex(ref, "/")+1:])
	}
	for _, p := range s.Properties {
		p := p
		walkRefs(&p, visit)
	}
	if s.Items != nil {
		walkRefs(s.Items.Schema, visit)
	}
	if s.AdditionalProperties != nil {
		walkRefs(s.AdditionalProperties.Schema, visit)
	}
	for i := range s.AllOf {
		walkRefs(&s.AllOf[i], visit)
	}
}

// convertCustom converts a custom resource between the served versions of its kind,
// which differ only in apiVersion.
func convertCustom(in runtime.Object, gv schema.GroupVersion) runtime.Object {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	out := u.DeepCopy()
	out.SetAPIVersion(gv.String())
	return out
}

// customConvertor converts custom resources of one kind between its versions.
type customConvertor struct {
	*convertor
	kind *customKind
}

func (c customConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gv, ok := target.(schema.GroupVersion)
	if !ok {
		return c.convertor.ConvertToVersion(in, target)
	}
	if _, ok := in.(*unstructured.Unstructured); !ok || !c.kind.versions[gv.Version] {
		return nil, runtime.NewNotRegisteredGVKErrForTarget("custom", in.GetObjectKind().GroupVersionKind(), target)
	}
	return convertCustom(in, gv), nil
}

// unstructuredCreater makes the empty objects the field manager asks for: custom
// resources are always unstructured.
type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
