package serviceaccount

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func namespace(name string, terminating bool) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	if terminating {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
		ns.Status.Phase = corev1.NamespaceTerminating
	}
	return ns
}

func account(ns, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestDefaultServiceAccount(t *testing.T) {
	tests := []struct {
		story      string
		observed   []runtime.Object
		namespace  string
		wantCreate bool
	}{
		{"a new namespace gets a default account", []runtime.Object{namespace("team-a", false)}, "team-a", true},
		{"an account deleted by a user comes back", []runtime.Object{namespace("team-a", false), account("team-a", "builder")}, "team-a", true},
		{"an existing default account is left alone", []runtime.Object{namespace("team-a", false), account("team-a", "default")}, "team-a", false},
		{"a terminating namespace gets nothing", []runtime.Object{namespace("team-a", true)}, "team-a", false},
		{"a namespace that is gone gets nothing", nil, "team-a", false},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			client := fake.NewClientset(tt.observed...)
			inf := informers.NewSharedInformerFactory(client, 0)
			c := New(client, inf.Core().V1().Namespaces(), inf.Core().V1().ServiceAccounts())
			for _, o := range tt.observed {
				switch o := o.(type) {
				case *corev1.Namespace:
					inf.Core().V1().Namespaces().Informer().GetIndexer().Add(o)
				case *corev1.ServiceAccount:
					inf.Core().V1().ServiceAccounts().Informer().GetIndexer().Add(o)
				}
			}
			if err := c.sync(context.Background(), tt.namespace); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var created []string
			for _, a := range client.Actions() {
				if a.GetVerb() == "create" && a.GetResource().Resource == "serviceaccounts" {
					created = append(created, a.GetNamespace()+"/"+a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.ServiceAccount).Name)
				}
			}
			if tt.wantCreate && (len(created) != 1 || created[0] != tt.namespace+"/default") {
				t.Fatalf("created %v, want [%s/default]", created, tt.namespace)
			}
			if !tt.wantCreate && len(created) != 0 {
				t.Fatalf("created %v, want nothing", created)
			}
		})
	}
}
