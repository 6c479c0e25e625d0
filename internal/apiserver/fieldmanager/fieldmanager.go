// Package fieldmanager keeps metadata.managedFields for the apiserver's writes and
// merges server-side apply requests, as upstream's apiserver does, on top of
// apimachinery's managedfields library (structured-merge-diff underneath).
//
// Schemas come from the OpenAPI models of the served built-in resources. The type
// converter built from them is large, so one Managers value per server builds it once,
// on the first write, and shares it; the per-kind field managers are cheap and kept
// as they are first needed.
package fieldmanager

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"mizzen/internal/registry"
)

// Managers holds the shared type converter and one field manager per kind and
// subresource.
type Managers struct {
	log       *slog.Logger
	scheme    *runtime.Scheme
	models    func() (map[string]*spec.Schema, error)
	convertor *convertor
	// defaulters default an object of a served kind as its resource's strategy does.
	defaulters map[schema.GroupVersionKind]func(runtime.Object)
	hasStatus  map[schema.GroupVersionKind]bool

	// libraryOnly leaves updates wholly to the library: its validation, its
	// comparison of whole objects with the live managedFields (the tests' and
	// benchmarks' baseline).
	libraryOnly bool

	buildOnce     sync.Once
	typeConverter managedfields.TypeConverter
	buildErr      error

	mu       sync.Mutex
	managers map[managerKey]*managedfields.FieldManager
	// empties holds an *emptyKind per kind, for creates.
	empties sync.Map

	// custom are the custom resource kinds, added and removed while the server runs.
	customMu sync.RWMutex
	custom   map[schema.GroupVersionKind]*customKind
	metaOnce sync.Once
	meta     map[string]*spec.Schema
}

type managerKey struct {
	gvk         schema.GroupVersionKind
	subresource string
	// forUpdate: the manager records updates only, and compares objects without
	// their inert managedFields (managedFieldsDropping).
	forUpdate bool
}

// New prepares field management for the given resources; models returns the OpenAPI
// definitions the type converter is built from, called once, on first use.
func New(log *slog.Logger, scheme *runtime.Scheme, resources []*registry.Resource, models func() (map[string]*spec.Schema, error)) *Managers {
	m := &Managers{
		log:        log,
		scheme:     scheme,
		models:     models,
		convertor:  newConvertor(scheme, resources),
		defaulters: map[schema.GroupVersionKind]func(runtime.Object){},
		hasStatus:  map[schema.GroupVersionKind]bool{},
		managers:   map[managerKey]*managedfields.FieldManager{},
		custom:     map[schema.GroupVersionKind]*customKind{},
	}
	for _, r := range resources {
		gvk := r.GroupVersionKind()
		m.hasStatus[gvk] = r.HasStatus
		if r.Strategy != nil {
			m.defaulters[gvk] = r.Strategy.Default
		}
	}
	return m
}

// TypeConverter returns the shared type converter, building it on first use.
func (m *Managers) TypeConverter() (managedfields.TypeConverter, error) {
	m.buildOnce.Do(func() {
		start := time.Now()
		models, err := m.models()
		if err != nil {
			m.buildErr = err
			return
		}
		tc, err := managedfields.NewTypeConverter(models, false)
		if err != nil {
			m.buildErr = err
			m.log.Error("building the type converter of server-side apply", "err", m.buildErr)
			return
		}
		m.typeConverter = tc
		if !m.libraryOnly {
			m.typeConverter = &fastValidating{TypeConverter: tc}
		}
		m.log.Info("built the type converter of server-side apply", "models", len(models), "took", time.Since(start).Round(time.Millisecond))
	})
	return m.typeConverter, m.buildErr
}

// manager returns the field manager of a kind written through subresource ("" for the
// object itself).
func (m *Managers) manager(gvk schema.GroupVersionKind, subresource string) (*managedfields.FieldManager, error) {
	return m.managerFor(managerKey{gvk: gvk, subresource: subresource})
}

// managerFor returns the field manager of key.
func (m *Managers) managerFor(key managerKey) (*managedfields.FieldManager, error) {
	gvk, subresource := key.gvk, key.subresource
	var tc managedfields.TypeConverter
	def := m.defaulters[gvk]
	ck := m.customKind(gvk)
	if ck != nil {
		tc, def = ck.tc, ck.defaulter
	} else {
		var err error
		if tc, err = m.TypeConverter(); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fm, ok := m.managers[key]; ok {
		return fm, nil
	}
	gv := gvk.GroupVersion()
	var resetFields map[fieldpath.APIVersion]fieldpath.Filter
	if f := m.ignoredFields(gvk, subresource); f != nil {
		resetFields = map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(gv.String()): f}
	}
	var convertor runtime.ObjectConvertor = m.convertor
	var creater runtime.ObjectCreater = m.scheme
	if ck != nil {
		convertor, creater = customConvertor{m.convertor, ck}, unstructuredCreater{}
	}
	if key.forUpdate && !m.libraryOnly {
		convertor = managedFieldsDropping{convertor}
	}
	fm, err := managedfields.NewDefaultFieldManager(tc, convertor, defaulter{def}, creater, gvk, gv, subresource, resetFields)
	if err != nil {
		return nil, err
	}
	m.managers[key] = fm
	return fm, nil
}

// resetsStatus says whether a write to the kind's main resource leaves its status
// alone (the kind has a status subresource).
func (m *Managers) resetsStatus(gvk schema.GroupVersionKind) bool {
	ck := m.customKind(gvk)
	return ck != nil && ck.hasStatus || m.hasStatus[gvk]
}

// ignoredFields filters out of a manager's fields what the endpoint does not write,
// as upstream's reset fields do: a write to an object leaves its status alone, a
// write to a subresource changes only that subresource's part.
func (m *Managers) ignoredFields(gvk schema.GroupVersionKind, subresource string) fieldpath.Filter {
	switch subresource {
	case "":
		// createWalk applies this filter itself (the root field its tree leaves
		// out): a change here is a change there.
		if m.resetsStatus(gvk) {
			return fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))
		}
		return nil
	case "status", "approval":
		return fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("status"))
	case "scale":
		return fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("spec", "replicas"))
	case "finalize":
		return fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("spec", "finalizers"))
	}
	return nil
}

// Update records manager (operation Update) as the owner of what changed from live to
// obj and returns obj with its managedFields set. live is not modified; an empty live
// object stands for a create. As upstream, field tracking never fails a write: if the
// fields cannot be worked out, obj keeps live's managedFields.
func (m *Managers) Update(gvk schema.GroupVersionKind, subresource string, live, obj runtime.Object, manager string) runtime.Object {
	fm, err := m.managerFor(managerKey{gvk: gvk, subresource: subresource, forUpdate: true})
	if err != nil {
		if acc, aerr := meta.Accessor(obj); aerr == nil {
			if liveAcc, lerr := meta.Accessor(live); lerr == nil {
				acc.SetManagedFields(liveAcc.GetManagedFields())
			}
		}
		return obj
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	if !m.libraryOnly {
		if liveCopy, objCopy, ok := m.withoutCommonFields(gvk, live, obj); ok {
			// The library changes nothing of the new object but its managedFields.
			out := fm.UpdateNoErrors(liveCopy, objCopy, manager)
			if outAcc, err := meta.Accessor(out); err == nil {
				if acc, err := meta.Accessor(obj); err == nil {
					acc.SetManagedFields(outAcc.GetManagedFields())
					return obj
				}
			}
		}
	}
	return fm.UpdateNoErrors(live, obj, manager)
}

// Apply merges an applied configuration (decoded from an apply patch, with apiVersion
// and kind) into live for manager and returns the merged object, typed, defaulted and
// with its managedFields set. Conflicts with other managers are a 409 listing them,
// unless force takes the fields over; a configuration that does not fit the schema is
// a 400.
func (m *Managers) Apply(gvk schema.GroupVersionKind, subresource string, live, applied runtime.Object, manager string, force bool) (runtime.Object, error) {
	fm, err := m.manager(gvk, subresource)
	if err != nil {
		return nil, err
	}
	live.GetObjectKind().SetGroupVersionKind(gvk)
	obj, err := fm.Apply(live, applied, manager, force)
	if err != nil {
		return nil, asStatusError(err)
	}
	return obj, nil
}

// asStatusError turns the library's plain error for a configuration that does not
// fit the schema into a 400 (upstream answers 500 here, a known bug).
func asStatusError(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	if strings.HasPrefix(err.Error(), "failed to create typed patch object") {
		return apierrors.NewBadRequest(err.Error())
	}
	return err
}

// ManagerName is the manager a write is recorded under: the fieldManager parameter,
// or else the user agent up to its first "/", printable characters only, cut to the
// 128 bytes a manager name may have, as upstream does.
func ManagerName(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var buf bytes.Buffer
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if buf.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		buf.WriteRune(r)
	}
	return buf.String()
}

// defaulter adapts a strategy's Default to runtime.ObjectDefaulter.
type defaulter struct{ def func(runtime.Object) }

func (d defaulter) Default(obj runtime.Object) {
	if d.def != nil {
		d.def(obj)
	}
}

// MergeApplyConfiguration merges a partial object into obj with server-side apply's
// merge rules for obj's schema (list types, map keys, atomic fields), without
// recording any manager: what MutatingAdmissionPolicy's ApplyConfiguration mutations
// do. obj must carry its apiVersion and kind; the result is of obj's type.
func (m *Managers) MergeApplyConfiguration(obj runtime.Object, config map[string]interface{}) (runtime.Object, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	var tc managedfields.TypeConverter
	if ck := m.customKind(gvk); ck != nil {
		tc = ck.tc
	} else {
		var err error
		if tc, err = m.TypeConverter(); err != nil {
			return nil, err
		}
	}
	return MergeTyped(tc, obj, config)
}

// MergeTyped is MergeApplyConfiguration with a given type converter.
func MergeTyped(tc managedfields.TypeConverter, obj runtime.Object, config map[string]interface{}) (runtime.Object, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	live, err := tc.ObjectToTyped(obj, typed.AllowDuplicates)
	if err != nil {
		return nil, err
	}
	cfg := make(map[string]interface{}, len(config)+2)
	for k, v := range config {
		cfg[k] = v
	}
	cfg["apiVersion"], cfg["kind"] = gvk.GroupVersion().String(), gvk.Kind
	patch, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: cfg})
	if err != nil {
		return nil, fmt.Errorf("the apply configuration does not fit the object's schema: %v", err)
	}
	if found := atomics("", patch.Schema(), patch.TypeRef(), patch.AsValue()); len(found) > 0 {
		// Merging into an atomic value replaces it whole, dropping what the
		// configuration does not repeat: upstream refuses that rather than lose data.
		return nil, fmt.Errorf("invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: %s", strings.Join(found, ", "))
	}
	merged, err := live.Merge(patch)
	if err != nil {
		return nil, err
	}
	content, ok := merged.AsValue().Unstructured().(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("the merged object is not an object")
	}
	if _, ok := obj.(runtime.Unstructured); ok {
		return &unstructured.Unstructured{Object: content}, nil
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, out); err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out, nil
}

// atomics lists the paths (as ".spec.selector", ".spec.containers[0].args") of the
// atomic lists, maps and structs a value sets.
func atomics(path string, s *smdschema.Schema, tr smdschema.TypeRef, v value.Value) []string {
	a, ok := s.Resolve(tr)
	if !ok {
		return nil
	}
	var out []string
	switch {
	case v.IsMap() && a.Map != nil:
		if a.Map.ElementRelationship == smdschema.Atomic {
			out = append(out, path)
		}
		v.AsMap().Iterate(func(key string, val value.Value) bool {
			child := a.Map.ElementType
			if f, ok := a.Map.FindField(key); ok {
				child = f.Type
			}
			out = append(out, atomics(path+"."+key, s, child, val)...)
			return true
		})
	case v.IsList() && a.List != nil:
		if a.List.ElementRelationship == smdschema.Atomic {
			out = append(out, path)
		}
		l := v.AsList()
		for i := 0; i < l.Length(); i++ {
			out = append(out, atomics(fmt.Sprintf("%s[%d]", path, i), s, a.List.ElementType, l.At(i))...)
		}
	}
	return out
}
