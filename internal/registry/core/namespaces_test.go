package core

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestNamespaceCreate(t *testing.T) {
	tests := []struct {
		name           string
		finalizers     []corev1.FinalizerName
		wantFinalizers []corev1.FinalizerName
	}{
		{"no finalizers", nil, []corev1.FinalizerName{"kubernetes"}},
		{"kubernetes already there", []corev1.FinalizerName{"kubernetes"}, []corev1.FinalizerName{"kubernetes"}},
		{"other finalizer kept", []corev1.FinalizerName{"example.com/cleanup"}, []corev1.FinalizerName{"example.com/cleanup", "kubernetes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := namespacesResource()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"owner": "me"}},
				Spec: corev1.NamespaceSpec{Finalizers: tc.finalizers}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
			r.Strategy.Default(ns)
			r.Strategy.PrepareForCreate(context.Background(), ns)
			if !slices.Equal(ns.Spec.Finalizers, tc.wantFinalizers) {
				t.Errorf("finalizers = %v, want %v", ns.Spec.Finalizers, tc.wantFinalizers)
			}
			if ns.Status.Phase != corev1.NamespaceActive {
				t.Errorf("phase = %q, want Active", ns.Status.Phase)
			}
			if ns.Labels["kubernetes.io/metadata.name"] != "team-a" || ns.Labels["owner"] != "me" {
				t.Errorf("labels = %v, want the name label added to the user's", ns.Labels)
			}
			assertErrors(t, r.Strategy.Validate(context.Background(), ns), nil)
		})
	}
}

func TestNamespaceValidate(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes", "cleanup"}}}
	assertErrors(t, namespacesResource().Strategy.Validate(context.Background(), ns),
		[]string{`spec.finalizers[1]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`})
}

func TestNamespaceUpdateKeepsFinalizers(t *testing.T) {
	for _, deleting := range []bool{false, true} {
		old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
		if deleting {
			now := metav1.Now()
			old.DeletionTimestamp = &now
		}
		ns := old.DeepCopy()
		ns.Spec.Finalizers = nil
		namespacesResource().Strategy.PrepareForUpdate(context.Background(), ns, old)
		if !slices.Equal(ns.Spec.Finalizers, old.Spec.Finalizers) {
			t.Errorf("deleting=%v: finalizers = %v after an update, want %v kept (only finalize changes them)", deleting, ns.Spec.Finalizers, old.Spec.Finalizers)
		}
	}
}

func TestNamespacePrinterAndFields(t *testing.T) {
	r := namespacesResource()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	assertRow(t, r.Printer.Row(ns), []interface{}{"old", "Terminating", "<unknown>"})
	if got := r.Fields(ns); !equality.Semantic.DeepEqual(got, fields.Set{"status.phase": "Terminating"}) {
		t.Errorf("fields = %v", got)
	}
}
