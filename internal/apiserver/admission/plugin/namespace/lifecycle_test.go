package namespace

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/admissiontest"
)

func TestLifecycle(t *testing.T) {
	now := metav1.Now()
	store := admissiontest.New(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dying", DeletionTimestamp: &now}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
	)
	l := NewLifecycle(store)
	cm := func(op admission.Operation, ns string) *admission.Attributes {
		return &admission.Attributes{Operation: op, Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Namespace: ns, Name: "x",
			Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}}
	}
	if err := l.Validate(context.Background(), cm(admission.Create, "live")); err != nil {
		t.Error(err)
	}
	err := l.Validate(context.Background(), cm(admission.Create, "dying"))
	se, ok := err.(*apierrors.StatusError)
	if !ok || err.Error() != `configmaps "x" is forbidden: unable to create new content in namespace dying because it is being terminated` ||
		len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Type != corev1.NamespaceTerminatingCause {
		t.Errorf("terminating: %#v", err)
	}
	if err := l.Validate(context.Background(), cm(admission.Update, "dying")); err != nil {
		t.Errorf("updates go on in a terminating namespace: %v", err)
	}
	if err := l.Validate(context.Background(), cm(admission.Create, "gone")); !apierrors.IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
	del := &admission.Attributes{Operation: admission.Delete, Resource: corev1.SchemeGroupVersion.WithResource("namespaces"), Name: "kube-public"}
	if err := l.Validate(context.Background(), del); err == nil || err.Error() != `namespaces "kube-public" is forbidden: this namespace may not be deleted` {
		t.Errorf("delete kube-public: %v", err)
	}
	del.Name = "live"
	if err := l.Validate(context.Background(), del); err != nil {
		t.Error(err)
	}
}
