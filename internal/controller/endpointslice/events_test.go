package endpointslice

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

func TestFailedWritesAreReportedOnTheService(t *testing.T) {
	tests := []struct {
		story  string
		reject error
		want   []string
	}{
		{"a refused write is reported as upstream words it", apierrors.NewInternalError(errString("etcd is down")),
			[]string{"Warning FailedToUpdateEndpointSlices Error updating Endpoint Slices for Service shop/cart: " +
				"create endpoint slice for shop/cart: Internal error occurred: etcd is down"}},
		{"a namespace going away is no failure", &apierrors.StatusError{ErrStatus: apierrors.NewForbidden(
			schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errString("namespace shop is terminating")).ErrStatus},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.story, func(t *testing.T) {
			f := newFixture(service("cart"), pod("cart-a", "cart", "10.0.0.1", true))
			if apierrors.IsForbidden(tt.reject) {
				tt.reject.(*apierrors.StatusError).ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
			}
			f.client.PrependReactor("create", "endpointslices", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.reject
			})
			events := record.NewFakeRecorder(10)
			f.c.recorder = events
			_ = f.c.sync(context.Background(), "shop/cart")
			var got []string
			for len(events.Events) > 0 {
				got = append(got, <-events.Events)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }
