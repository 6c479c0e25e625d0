// Package admission is the apiserver's admission chain: the attributes of a write as
// plugins see them, the mutating and validating plugin interfaces, and the chain that
// runs every enabled plugin in upstream's order, mutating ones first. Plugins live in
// plugin/<name>; plugins/ knows their names, order and defaults.
package admission

import (
	"context"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

// Operation is what a request does to an object, in AdmissionReview's spelling.
type Operation string

const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// Attributes describe one write as admission sees it.
type Attributes struct {
	Operation Operation
	// Kind is the object's kind; Resource and Subresource what the request named.
	Kind        schema.GroupVersionKind
	Resource    schema.GroupVersionResource
	Subresource string
	// RequestKind and RequestResource are what the request named when Kind, Resource
	// and the objects are another served version's, converted for a webhook or policy
	// registered for that version (matchPolicy Equivalent); zero otherwise.
	RequestKind     schema.GroupVersionKind
	RequestResource schema.GroupVersionResource
	Namespace       string
	Name            string
	// Object is the object to be written (nil for DELETE); mutating plugins may change
	// it in place or replace it. OldObject is the stored object (UPDATE, DELETE).
	Object    runtime.Object
	OldObject runtime.Object
	// User made the request; Internal is set for the apiserver's own writes (no user).
	User     registry.User
	Internal bool
	DryRun   bool
	// Options are the request's CreateOptions, UpdateOptions or DeleteOptions.
	Options runtime.Object
}

// Handler is a plugin; it implements Mutator, Validator, or both.
type Handler interface {
	// Handles says whether the plugin wants requests of this operation at all.
	Handles(op Operation) bool
}

// Mutator may change the object of a request, or refuse it.
type Mutator interface {
	Handler
	Admit(ctx context.Context, a *Attributes) error
}

// Validator may refuse a request, once every mutator has run and the object is valid.
type Validator interface {
	Handler
	Validate(ctx context.Context, a *Attributes) error
}

// Plugin is a named handler in the chain.
type Plugin struct {
	Name    string
	Handler Handler
}

// Chain runs plugins in order. Which plugins mutate, validate or may be reinvoked is
// found once, when the chain is made, rather than on every request.
type Chain struct {
	plugins    []Plugin
	mutators   []mutatorStep
	validators []Validator
}

// mutatorStep is a mutating plugin and, if it is one, the same plugin as a Reinvoker.
type mutatorStep struct {
	Mutator
	reinvoker Reinvoker
}

// NewChain returns the chain of the plugins, in their order.
func NewChain(plugins ...Plugin) Chain {
	c := Chain{plugins: plugins}
	for _, p := range plugins {
		if m, ok := p.Handler.(Mutator); ok {
			ri, _ := m.(Reinvoker)
			c.mutators = append(c.mutators, mutatorStep{m, ri})
		}
		if v, ok := p.Handler.(Validator); ok {
			c.validators = append(c.validators, v)
		}
	}
	return c
}

// Admit runs every mutating plugin that handles the operation, stopping at the first
// refusal; parts that asked for reinvocation run once more if a later mutation changed
// the object (see Reinvoker).
func (c Chain) Admit(ctx context.Context, a *Attributes) error {
	return c.admitWithReinvocation(ctx, a)
}

// Validate runs every validating plugin that handles the operation, stopping at the
// first refusal.
func (c Chain) Validate(ctx context.Context, a *Attributes) error {
	for _, v := range c.validators {
		if !v.Handles(a.Operation) {
			continue
		}
		if err := v.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Names lists the chain's plugins in order.
func (c Chain) Names() []string {
	out := make([]string, len(c.plugins))
	for i, p := range c.plugins {
		out[i] = p.Name
	}
	return out
}

// Ops is an embeddable Handles for plugins that want some operations.
type Ops []Operation

func (h Ops) Handles(op Operation) bool {
	for _, o := range h {
		if o == op {
			return true
		}
	}
	return false
}

// NewForbidden is upstream's admission refusal: 403 naming the request's resource and
// object.
func NewForbidden(a *Attributes, err error) error {
	if apierrors.IsForbidden(err) {
		return err
	}
	name := a.Name
	if name == "" && a.Object != nil {
		if acc, e := meta.Accessor(a.Object); e == nil {
			// Before a create the name may be still to be generated.
			name = acc.GetName()
			if name == "" {
				name = acc.GetGenerateName()
			}
		}
	}
	if name == "" {
		name = "Unknown"
	}
	return apierrors.NewForbidden(a.Resource.GroupResource(), name, err)
}

// Forbiddenf is NewForbidden with a formatted message.
func Forbiddenf(a *Attributes, format string, args ...any) error {
	return NewForbidden(a, fmt.Errorf(format, args...))
}

// Reader is how plugins read the cluster's objects: from the apiserver's watch cache,
// falling back to storage. Missing objects are NotFound API errors. What it returns
// may be the cache's own object, shared with every reader: a plugin copies it before
// changing it.
type Reader interface {
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error)
	// List lists a namespace's objects, or every namespace's for "".
	List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]runtime.Object, error)
}

// ListVersioner is a Reader that can tell, without decoding anything, which version of
// a resource's objects List would return: equal stamps mean equal lists, so a plugin
// may keep what it derived from the last list (Priority's global default class). A
// stamp is never empty.
type ListVersioner interface {
	ListVersion(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (string, error)
}

// StatusWriter changes an object's status atomically: update gets the stored object
// and returns it with the new status (or an error to write nothing); it is called
// again on a conflicting write. It returns the stored result.
type StatusWriter interface {
	UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, update func(current runtime.Object) (runtime.Object, error)) (runtime.Object, error)
}

// ServiceResolver turns a Service port into the address (host:port) of one of its
// ready endpoints, for webhooks named by a service reference.
type ServiceResolver interface {
	ResolveService(ctx context.Context, namespace, name string, port int32) (string, error)
}

// ApplyMerger merges an apply configuration (a partial object, as JSON-like maps)
// into an object with server-side apply's merge rules for the object's schema, as
// MutatingAdmissionPolicy's ApplyConfiguration mutations are merged.
type ApplyMerger interface {
	MergeApplyConfiguration(obj runtime.Object, config map[string]interface{}) (runtime.Object, error)
}

// Converter converts objects between the served versions of one resource, for the
// webhooks and policies registered with matchPolicy Equivalent for a version other
// than the request's.
type Converter interface {
	// Versions lists the versions a resource is served in, preferred first.
	Versions(gr schema.GroupResource) []string
	// Convert turns obj, an object of the served resource from, into version to of the
	// same resource, and names its kind.
	Convert(obj runtime.Object, from schema.GroupVersionResource, to string) (runtime.Object, schema.GroupVersionKind, error)
}

// InVersion returns a copy of a with its objects converted to version, Kind and
// Resource naming that version, and RequestKind and RequestResource what the request
// named. a itself is returned when it already is of that version.
func (a *Attributes) InVersion(c Converter, version string) (*Attributes, error) {
	if version == a.Resource.Version {
		return a, nil
	}
	out := *a
	out.RequestKind, out.RequestResource = a.OriginalKind(), a.OriginalResource()
	out.Resource.Version = version
	convert := func(obj runtime.Object) (runtime.Object, error) {
		if obj == nil {
			return nil, nil
		}
		conv, gvk, err := c.Convert(obj, a.Resource, version)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("converting %s to %s: %v", a.Resource, version, err))
		}
		out.Kind = gvk
		return conv, nil
	}
	var err error
	out.Kind.Version = version
	if out.Object, err = convert(a.Object); err != nil {
		return nil, err
	}
	if out.OldObject, err = convert(a.OldObject); err != nil {
		return nil, err
	}
	return &out, nil
}

// OriginalKind is the kind the request named.
func (a *Attributes) OriginalKind() schema.GroupVersionKind {
	if !a.RequestKind.Empty() {
		return a.RequestKind
	}
	return a.Kind
}

// OriginalResource is the resource the request named.
func (a *Attributes) OriginalResource() schema.GroupVersionResource {
	if !a.RequestResource.Empty() {
		return a.RequestResource
	}
	return a.Resource
}

// Deps is what plugins are built with.
type Deps struct {
	Reader       Reader
	StatusWriter StatusWriter
	Services     ServiceResolver
	Apply        ApplyMerger
	Converter    Converter
	// Authorizer answers the plugins that check a user's permissions (signers for
	// CSRs); nil allows everything, as an apiserver without an authorizer does.
	Authorizer authz.Authorizer
	Log        *slog.Logger
}

type warningsKey struct{}

// WithWarnings returns a context whose AddWarning calls reach sink.
func WithWarnings(ctx context.Context, sink func(string)) context.Context {
	return context.WithValue(ctx, warningsKey{}, sink)
}

// AddWarning sends a warning to the client of the request in ctx, if it has one.
func AddWarning(ctx context.Context, msg string) {
	if sink, ok := ctx.Value(warningsKey{}).(func(string)); ok && sink != nil {
		sink(msg)
	}
}
