// Package namespace holds the namespace admission plugins: NamespaceLifecycle (no new
// content in a namespace that is missing or being terminated; the system namespaces
// stay), NamespaceExists and NamespaceAutoProvision.
package namespace

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/admission"
)

// Upstream's plugin names.
const (
	LifecyclePluginName     = "NamespaceLifecycle"
	ExistsPluginName        = "NamespaceExists"
	AutoProvisionPluginName = "NamespaceAutoProvision"
)

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// immortal namespaces may not be deleted.
var immortal = map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true}

// Lifecycle is the NamespaceLifecycle plugin.
type Lifecycle struct {
	admission.Ops
	reader admission.Reader
}

// NewLifecycle returns NamespaceLifecycle reading namespaces through r.
func NewLifecycle(r admission.Reader) *Lifecycle {
	return &Lifecycle{Ops: admission.Ops{admission.Create, admission.Delete}, reader: r}
}

var _ admission.Validator = (*Lifecycle)(nil)

func isNamespace(a *admission.Attributes) bool {
	return a.Resource.GroupResource() == namespacesGVR.GroupResource() && a.Subresource == ""
}

// Validate refuses deleting a system namespace and creating in a namespace that is
// missing or terminating.
func (l *Lifecycle) Validate(ctx context.Context, a *admission.Attributes) error {
	if isNamespace(a) {
		if a.Operation == admission.Delete && immortal[a.Name] {
			return admission.NewForbidden(a, fmt.Errorf("this namespace may not be deleted"))
		}
		return nil
	}
	if a.Operation != admission.Create || a.Namespace == "" {
		return nil
	}
	ns, err := l.namespace(ctx, a.Namespace)
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		err := admission.NewForbidden(a, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
		if se, ok := err.(*apierrors.StatusError); ok && se.ErrStatus.Details != nil {
			se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
				Type:    corev1.NamespaceTerminatingCause,
				Message: fmt.Sprintf("namespace %s is being terminated", a.Namespace),
				Field:   "metadata.namespace",
			})
		}
		return err
	}
	return nil
}

func (l *Lifecycle) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	obj, err := l.reader.Get(ctx, namespacesGVR, "", name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
		}
		return nil, apierrors.NewInternalError(err)
	}
	return obj.(*corev1.Namespace), nil
}

// Exists is NamespaceExists: objects may only be written in a namespace that exists.
type Exists struct {
	admission.Ops
	reader admission.Reader
}

// NewExists returns NamespaceExists.
func NewExists(r admission.Reader) *Exists {
	return &Exists{Ops: admission.Ops{admission.Create, admission.Update, admission.Delete}, reader: r}
}

var _ admission.Validator = (*Exists)(nil)

func (e *Exists) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Namespace == "" || isNamespace(a) {
		return nil
	}
	_, err := (&Lifecycle{reader: e.reader}).namespace(ctx, a.Namespace)
	return err
}
