package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/registry"
)

// admissionAttributes describes a write for the admission chain.
func (s *Server) admissionAttributes(ctx context.Context, op admission.Operation, h *resourceHandler, subresource, namespace, name string, obj, old runtime.Object, dryRun bool, options runtime.Object) *admission.Attributes {
	a := &admission.Attributes{
		Operation: op, Kind: h.GroupVersionKind(), Resource: h.GroupVersionResource(), Subresource: subresource,
		Namespace: namespace, Name: name, Object: obj, OldObject: old, DryRun: dryRun, Options: options,
	}
	if u, ok := registry.UserFrom(ctx); ok {
		a.User = u
	} else {
		a.Internal = true
	}
	return a
}

// admittedKey marks a request admitted as the object it creates (a Binding, an
// Eviction).
type admittedKey struct{}

// withAdmitted marks ctx as a request already admitted as the object it creates: the
// writes it then makes to the pod go through no admission, as upstream's binding and
// eviction storage write the pod directly.
func withAdmitted(ctx context.Context) context.Context {
	return context.WithValue(ctx, admittedKey{}, true)
}

func admitted(ctx context.Context) bool {
	done, _ := ctx.Value(admittedKey{}).(bool)
	return done
}

// admitCreated runs the whole chain for the object a subresource's POST creates (a
// Binding, an Eviction), as upstream's create handler does before its storage runs.
func (s *Server) admitCreated(r *http.Request, info *requestInfo, h *resourceHandler, obj runtime.Object, kind schema.GroupVersionKind) error {
	ctx, dryRun := r.Context(), isDryRun(r)
	a := s.admissionAttributes(ctx, admission.Create, h, info.Subresource, info.Namespace, info.Name, obj, nil, dryRun, &metav1.CreateOptions{DryRun: dryRunList(dryRun)})
	a.Kind = kind
	if err := s.mutate(ctx, a); err != nil {
		return err
	}
	return s.validateAdmission(ctx, a)
}

// mutate runs the mutating half of the chain; the object may come back replaced.
func (s *Server) mutate(ctx context.Context, a *admission.Attributes) error {
	if admitted(ctx) {
		return nil
	}
	return s.admission.Admit(ctx, a)
}

// validateAdmission runs the storage validators (RBAC's escalation check) and then
// the validating half of the chain.
func (s *Server) validateAdmission(ctx context.Context, a *admission.Attributes) error {
	if admitted(ctx) {
		return nil
	}
	for _, v := range s.cfg.StorageValidators {
		if v.Handles(a.Operation) {
			if err := v.Validate(ctx, a); err != nil {
				return err
			}
		}
	}
	return s.admission.Validate(ctx, a)
}

// admitConnect runs admission for a CONNECT (pods/exec, attach, portforward): the
// object is the request's options, as upstream sends it to webhooks and policies.
func (s *Server) admitConnect(r *http.Request, info *requestInfo, h *resourceHandler) error {
	q := r.URL.Query()
	flag := func(name string) bool { return isTrue(q.Get(name)) }
	var opts runtime.Object
	var kind string
	switch info.Subresource {
	case "exec":
		opts, kind = &corev1.PodExecOptions{Container: q.Get("container"), Command: q["command"],
			Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty")}, "PodExecOptions"
	case "attach":
		opts, kind = &corev1.PodAttachOptions{Container: q.Get("container"),
			Stdin: flag("stdin"), Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty")}, "PodAttachOptions"
	default:
		pf := &corev1.PodPortForwardOptions{}
		for _, p := range q["ports"] {
			if n, err := strconv.ParseInt(p, 10, 32); err == nil {
				pf.Ports = append(pf.Ports, int32(n))
			}
		}
		opts, kind = pf, "PodPortForwardOptions"
	}
	ctx := r.Context()
	a := s.admissionAttributes(ctx, admission.Connect, h, info.Subresource, info.Namespace, info.Name, opts, nil, false, nil)
	a.Kind = corev1.SchemeGroupVersion.WithKind(kind)
	if err := s.mutate(ctx, a); err != nil {
		return err
	}
	return s.validateAdmission(ctx, a)
}

// withWarnings lets admission plugins add Warning headers to the response.
func withWarnings(ctx context.Context, w http.ResponseWriter) context.Context {
	return admission.WithWarnings(ctx, func(msg string) {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
	})
}

// admissionReader reads objects for the admission plugins from the watch cache.
type admissionReader struct{ s *Server }

func (r admissionReader) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	return r.s.cachedObject(ctx, gvr, namespace, name)
}

func (r admissionReader) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]runtime.Object, error) {
	h := r.s.handlers[gvr]
	if h == nil {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	entries, _, err := r.s.cache.List(h.segment, h.listPrefix(namespace), nil)
	if err != nil {
		return nil, err
	}
	return presentEntries(h, entries)
}

// ListVersion stamps the cached list by its length and its newest entry's revision:
// a put after a list gives a newer revision than any listed, and deletions alone
// shorten it, so no two different lists share a stamp.
func (r admissionReader) ListVersion(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (string, error) {
	h := r.s.handlers[gvr]
	if h == nil {
		return "", apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	entries, _, err := r.s.cache.List(h.segment, h.listPrefix(namespace), nil)
	if err != nil {
		return "", err
	}
	var newest int64
	for _, e := range entries {
		newest = max(newest, e.RV)
	}
	return fmt.Sprintf("%d/%d", len(entries), newest), nil
}

// UpdateStatus changes an object's status inside one storage transaction, as the
// apiserver itself (upstream's loopback client is system:apiserver in system:masters).
func (r admissionReader) UpdateStatus(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, update func(runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	h := r.s.handlers[gvr]
	if h == nil {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	ctx = registry.WithUser(ctx, registry.User{Name: "system:apiserver", Groups: []string{"system:masters"}})
	return r.s.updateObject(ctx, h, namespace, name, updateStatus, false, nil, update)
}

// ResolveService picks a ready endpoint of a Service's port for a webhook.
func (r admissionReader) ResolveService(ctx context.Context, namespace, name string, port int32) (string, error) {
	obj, err := r.s.cachedObject(ctx, servicesGVR, namespace, name)
	if err != nil {
		return "", err
	}
	svc := obj.(*corev1.Service)
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil
	}
	return r.s.serviceEndpoint(ctx, svc, strconv.Itoa(int(port)), name, false)
}

// beforeCreate reserves what a new object needs from shared pools (a service's cluster
// IP and node ports); release undoes it if the create does not happen.
func (s *Server) beforeCreate(ctx context.Context, h *resourceHandler, obj runtime.Object, dryRun bool) (release func(), err error) {
	if h.GroupVersionResource() == servicesGVR && s.services != nil {
		return s.services.allocate(ctx, obj, dryRun)
	}
	return func() {}, nil
}

// handlerAnyVersion is the handler of gvr, built-in or custom; nil if none serves it.
func (s *Server) handlerAnyVersion(gvr schema.GroupVersionResource) *resourceHandler {
	if h := s.handlers[gvr]; h != nil {
		return h
	}
	return s.custom.handler(gvr)
}

// Versions lists the versions a resource is served in, preferred first, for the
// webhooks and policies registered for another version than a request's.
func (r admissionReader) Versions(gr schema.GroupResource) []string {
	var vs []string
	for gvr := range r.s.handlers {
		if gvr.GroupResource() == gr {
			vs = append(vs, gvr.Version)
		}
	}
	for _, h := range r.s.custom.all() {
		if gvr := h.GroupVersionResource(); gvr.GroupResource() == gr && !contains(vs, gvr.Version) {
			vs = append(vs, gvr.Version)
		}
	}
	return sortVersions(vs)
}

// Convert turns an object of the served resource from into version to, through the
// storage version as every read and write is converted.
func (r admissionReader) Convert(obj runtime.Object, from schema.GroupVersionResource, to string) (runtime.Object, schema.GroupVersionKind, error) {
	fh, th := r.s.handlerAnyVersion(from), r.s.handlerAnyVersion(from.GroupResource().WithVersion(to))
	if fh == nil || th == nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("%s is not served in version %s", from.GroupResource(), to)
	}
	stored, err := fh.toStorage(obj.DeepCopyObject())
	if err != nil {
		return nil, schema.GroupVersionKind{}, err
	}
	out, err := th.present(stored)
	if err != nil {
		return nil, schema.GroupVersionKind{}, err
	}
	return out, th.GroupVersionKind(), nil
}
