package rootcacertpublisher

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

const bundle = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func ns(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func rootCAMap(namespace, ca string, extra map[string]string) *corev1.ConfigMap {
	data := map[string]string{"ca.crt": ca}
	for k, v := range extra {
		data[k] = v
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: namespace,
			Annotations: map[string]string{"kubernetes.io/description": description}},
		Data: data,
	}
}

func TestPublishRootCA(t *testing.T) {
	terminating := ns("old")
	now := metav1.Now()
	terminating.DeletionTimestamp = &now
	tests := []struct {
		story    string
		observed []runtime.Object
		wantVerb string // "create", "update" or "" for no write
	}{
		{"a new namespace gets the bundle", []runtime.Object{ns("apps")}, "create"},
		{"a bundle edited by hand is put back", []runtime.Object{ns("apps"), rootCAMap("apps", "tampered", nil)}, "update"},
		{"extra keys are removed", []runtime.Object{ns("apps"), rootCAMap("apps", bundle, map[string]string{"x": "y"})}, "update"},
		{"a current bundle is left alone", []runtime.Object{ns("apps"), rootCAMap("apps", bundle, nil)}, ""},
		{"a terminating namespace is skipped", []runtime.Object{terminating}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			client := fake.NewClientset(tt.observed...)
			inf := informers.NewSharedInformerFactory(client, 0)
			c := New(client, []byte(bundle), inf.Core().V1().Namespaces(), inf.Core().V1().ConfigMaps())
			var name string
			for _, o := range tt.observed {
				switch o := o.(type) {
				case *corev1.Namespace:
					inf.Core().V1().Namespaces().Informer().GetIndexer().Add(o)
					name = o.Name
				case *corev1.ConfigMap:
					inf.Core().V1().ConfigMaps().Informer().GetIndexer().Add(o)
				}
			}
			client.ClearActions()
			if err := c.sync(context.Background(), name); err != nil {
				t.Fatalf("sync: %v", err)
			}
			actions := client.Actions()
			if tt.wantVerb == "" {
				if len(actions) != 0 {
					t.Fatalf("wrote %v, want nothing", actions)
				}
				return
			}
			if len(actions) != 1 || actions[0].GetVerb() != tt.wantVerb {
				t.Fatalf("actions %v, want one %s", actions, tt.wantVerb)
			}
			cm := actions[0].(clienttesting.CreateAction).GetObject().(*corev1.ConfigMap)
			if cm.Name != "kube-root-ca.crt" || len(cm.Data) != 1 || cm.Data["ca.crt"] != bundle {
				t.Fatalf("wrote %s with data %v, want only ca.crt = the bundle", cm.Name, cm.Data)
			}
		})
	}
}
