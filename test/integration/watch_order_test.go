package integration

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	cachetools "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"mizzen/internal/testing/apiserver"
)

// TestConcurrentWatchesSeeOneOrder does what upstream's conformance spec "should receive
// events on concurrent watches in same order" does: while configmaps are created,
// updated and deleted, watches are started one after another, each from the version
// the first watch saw last, and every watch must see the same next event.
func TestConcurrentWatchesSeeOneOrder(t *testing.T) {
	c := kubernetes.NewForConfigOrDie(apiserver.Start(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "default"
	list, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resourceVersion := list.ResourceVersion

	produced := make(chan error, 1)
	go func() { produced <- produceConfigMapChanges(ctx, c, ns) }()

	lw := &cachetools.ListWatch{WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
		return c.CoreV1().ConfigMaps(ns).Watch(ctx, o)
	}}
	// next waits for a watch's next event; the bound only turns a hang into a failure.
	next := func(w watch.Interface) string {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("event %s of %T", ev.Type, ev.Object)
			}
			return cm.ResourceVersion
		case err := <-produced:
			t.Fatalf("producing changes: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("no watch event")
		}
		return ""
	}
	var watches []watch.Interface
	defer func() {
		for _, w := range watches {
			w.Stop()
		}
	}()
	for range 40 {
		w, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, lw)
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, w)
		resourceVersion = next(watches[0])
		for i, w := range watches[1:] {
			if got := next(w); got != resourceVersion {
				t.Fatalf("watch %d saw resourceVersion %s, the first saw %s", i+1, got, resourceVersion)
			}
		}
	}
}

// produceConfigMapChanges creates, updates and deletes configmaps at random until ctx ends.
func produceConfigMapChanges(ctx context.Context, c kubernetes.Interface, ns string) error {
	cms := c.CoreV1().ConfigMaps(ns)
	var existing []string
	for i, updates := 0, 0; ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		var err error
		switch op := rand.Intn(3); {
		case op == 0 || len(existing) == 0:
			name := fmt.Sprintf("cm-%d", i)
			i++
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			existing = append(existing, name)
		case op == 1:
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: existing[rand.Intn(len(existing))],
				Labels: map[string]string{"mutated": strconv.Itoa(updates)}}}
			updates++
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		default:
			idx := rand.Intn(len(existing))
			err = cms.Delete(ctx, existing[idx], metav1.DeleteOptions{})
			existing = append(existing[:idx], existing[idx+1:]...)
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}
