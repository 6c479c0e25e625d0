package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServiceAccountPrinter(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"},
		Secrets: []corev1.ObjectReference{{Name: "builder-token"}, {Name: "registry"}}}
	r := serviceAccountsResource()
	assertRow(t, r.Printer.Row(sa), []interface{}{"builder", int64(2), "<unknown>"})
	if r.Strategy != nil {
		t.Errorf("service accounts have no rules beyond metadata upstream; got a strategy")
	}
}
