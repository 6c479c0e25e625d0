package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestWatchFromExpiredVersion: once a version has left the watch history, a watch from
// it ends at once with 410 Gone (an ERROR event carrying the Status), as upstream's
// does, so informers know to list again.
func TestWatchFromExpiredVersion(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx := context.Background()
	first, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// More changes than the history keeps (4096 per resource).
	var wg sync.WaitGroup
	for w := 0; w < 20; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 220; i++ {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", w, i)}}
				if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return
		}
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Error {
			t.Fatalf("first event %s, want ERROR", ev.Type)
		}
		st, ok := ev.Object.(*metav1.Status)
		if !ok || st.Code != 410 {
			t.Fatalf("error event %#v, want a 410 Status", ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event from a watch at an expired version")
	}
	// A recent version still works.
	list, _ := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{Limit: 1})
	w2, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	w2.Stop()
}
