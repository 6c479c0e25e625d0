package endpoints

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

func TestFailedWritesAreReported(t *testing.T) {
	stale := &corev1.Endpoints{}
	stale.Namespace, stale.Name = "shop", "cart"
	tests := []struct {
		story    string
		observed []runtime.Object
		verb     string
		want     string
	}{
		{"a refused create", nil, "create",
			"Warning FailedToCreateEndpoint Failed to create endpoint for service shop/cart: Internal error occurred: etcd is down"},
		{"a refused update", []runtime.Object{stale}, "update",
			"Warning FailedToUpdateEndpoint Failed to update endpoint shop/cart: Internal error occurred: etcd is down"},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			f := newFixture(append(tt.observed, service("cart"), pod("cart-a", "cart", "10.0.0.1", true))...)
			f.client.PrependReactor(tt.verb, "endpoints", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewInternalError(errors.New("etcd is down"))
			})
			events := record.NewFakeRecorder(10)
			f.c.recorder = events
			if err := f.c.sync(context.Background(), "shop/cart"); err == nil {
				t.Fatal("sync succeeded despite the refused write")
			}
			var got []string
			for len(events.Events) > 0 {
				got = append(got, <-events.Events)
			}
			if !slices.Equal(got, []string{tt.want}) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}
