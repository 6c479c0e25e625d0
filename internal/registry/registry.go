// Package registry describes the apiserver's built-in resources: for each one its
// identity (group, version, kind, scope, names), how objects are defaulted and validated,
// which fields selectors can match, and how the server prints it as a Table.
//
// The apiserver serves every resource with one generic REST handler; everything that
// differs between resources lives here, in one Resource value per resource, filled in by
// the per-group packages below (registry/core, registry/apps, ...). This package never
// imports the apiserver.
package registry

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Resource is everything the apiserver needs to serve one resource at one version.
type Resource struct {
	// GroupVersion and Resource (plural, lower case) address it: /apis/<g>/<v>/<resource>.
	GroupVersion schema.GroupVersion
	Resource     string
	// Kind and SingularName as they appear in discovery ("Deployment", "deployment").
	Kind         string
	SingularName string
	Namespaced   bool
	ShortNames   []string
	Categories   []string // e.g. "all" for kubectl get all

	// ValidateName checks metadata.name (and a generateName prefix, with prefix true)
	// and returns the problems as upstream words them. Nil means a DNS-1123 subdomain,
	// the rule of most resources.
	ValidateName func(name string, prefix bool) []string

	// New returns an empty object of the resource's Go type; NewList its list type.
	New     func() runtime.Object
	NewList func() runtime.Object

	// Strategy defaults, validates and prepares objects on write. Nil means none.
	Strategy Strategy

	// OpenAPIModel, when set, is the OpenAPI v3 schema of the resource's objects, for
	// resources whose Go type cannot describe them (custom resources): published in
	// the OpenAPI documents and used by server-side apply. Its metadata refers to
	// #/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta.
	OpenAPIModel *spec.Schema

	// Prune, when set, drops from a decoded request body the fields the resource's
	// schema does not know and returns their paths ("spec.foo"), which fieldValidation
	// reports as unknown fields (custom resources; Go types drop them when decoding).
	Prune func(obj runtime.Object) []string

	// Fields returns the field-selector fields of an object. metadata.name and
	// metadata.namespace are always added by the server; nil means only those.
	Fields func(obj runtime.Object) fields.Set

	// Printer renders objects as Table rows for kubectl get. Nil prints Name and
	// Created At, as upstream's default table does (NAMESPACE is kubectl's own).
	Printer *Printer

	// Subresources served besides the object itself.
	HasStatus bool          // <resource>/status keeps status apart from spec
	Scale     *ScaleAdapter // <resource>/scale; nil when the resource has none

	// StorageResource, when set, names another resource whose stored objects this
	// resource serves (events.k8s.io/v1 events are core/v1 events); Convert* translate.
	StorageResource *schema.GroupResource
	// ToStorage converts an object of this version to the storage version, and
	// FromStorage back. Both are nil when the resource stores its own type.
	ToStorage   func(obj runtime.Object) (runtime.Object, error)
	FromStorage func(obj runtime.Object) (runtime.Object, error)
}

// GroupVersionKind of the resource's objects.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion.WithKind(r.Kind)
}

// GroupVersionResource of the resource.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.GroupVersion.WithResource(r.Resource)
}

// Strategy holds the resource-specific steps of a write. The server calls them in this
// order on create: Default, PrepareForCreate, Validate; and on update: Default,
// PrepareForUpdate, ValidateUpdate. Generic steps (name checks, uid, timestamps,
// generation bumps, keeping status apart from spec) are done by the server, not here.
type Strategy interface {
	// Default fills in defaulted fields in place, as upstream's defaulting does when it
	// decodes a request body.
	Default(obj runtime.Object)
	// PrepareForCreate clears or sets fields a client may not choose on create.
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	// PrepareForUpdate does the same on update; old is the stored object.
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	// Validate checks a new object; the paths in the errors are as upstream words them
	// (e.g. spec.containers[0].image).
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	// ValidateUpdate checks an update, including immutable fields.
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// StatusStrategy is a Strategy whose status subresource checks only what a status
// write may change, as upstream's status strategies do (pods: ValidatePodStatusUpdate).
// The server then keeps the stored spec over whatever mutating admission did to it, as
// their PrepareForUpdate does, so the spec needs no checking again. Without it a
// status write runs the whole ValidateUpdate.
type StatusStrategy interface {
	Strategy
	// ValidateStatusUpdate checks a status write; old is the stored object.
	ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// BaseStrategy does nothing at every step; embed it and override what a resource needs.
type BaseStrategy struct{}

func (BaseStrategy) Default(runtime.Object)                                           {}
func (BaseStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (BaseStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (BaseStrategy) Validate(context.Context, runtime.Object) field.ErrorList         { return nil }
func (BaseStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}

// Printer is the server-side printing of a resource, as upstream's printers produce it.
type Printer struct {
	// Columns lists every column, NAME first. Columns with Priority > 0 are shown by
	// kubectl only with -o wide.
	Columns []metav1.TableColumnDefinition
	// Row returns one cell per column (string, int64, bool or float64, as upstream).
	Row func(obj runtime.Object) []interface{}
}

// ScaleAdapter reads and writes the replica count of a scalable resource for the
// <resource>/scale subresource (autoscaling/v1 Scale).
type ScaleAdapter struct {
	// Get returns spec replicas, status replicas and the label selector string
	// (status.selector in the Scale object).
	Get func(obj runtime.Object) (specReplicas, statusReplicas int32, selector string)
	// Set writes spec replicas into obj in place.
	Set func(obj runtime.Object, replicas int32)
}
