package informermux

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// recorder is a handler that writes down what it was told.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) OnAdd(obj any, initial bool) {
	r.add(fmt.Sprintf("add %s initial=%v", obj.(*corev1.Pod).Name, initial))
}
func (r *recorder) OnUpdate(_, obj any) { r.add("update " + obj.(*corev1.Pod).Name) }
func (r *recorder) OnDelete(obj any)    { r.add("delete " + obj.(*corev1.Pod).Name) }

func pod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
}

func waitFor(t *testing.T, r *recorder, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.seen()
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handler saw %q, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHandlersShareOneListener: handlers added through the typed and the generic
// paths before the informer starts are one listener's, and each sees every event, in
// order, with the initial list marked as such.
func TestHandlersShareOneListener(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(pod("first"))
	f := NewFactory(informers.NewSharedInformerFactory(client, 0))

	var recorders []*recorder
	var regs []cache.ResourceEventHandlerRegistration
	for range 3 {
		r := &recorder{}
		reg, err := f.Core().V1().Pods().Informer().AddEventHandler(r)
		if err != nil {
			t.Fatal(err)
		}
		recorders, regs = append(recorders, r), append(regs, reg)
	}
	generic, err := f.ForResource(corev1.SchemeGroupVersion.WithResource("pods"))
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	reg, err := generic.Informer().AddEventHandler(r)
	if err != nil {
		t.Fatal(err)
	}
	recorders, regs = append(recorders, r), append(regs, reg)

	if len(f.shared) != 1 {
		t.Fatalf("%d wrapped informers for pods, want 1", len(f.shared))
	}
	for _, w := range f.shared {
		if len(w.handlers) != 4 {
			t.Fatalf("%d handlers on the shared listener, want 4", len(w.handlers))
		}
	}

	f.Start(ctx.Done())
	for _, reg := range regs {
		if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			t.Fatal("a handler never synced")
		}
	}
	for _, r := range recorders {
		// Synced means the initial list has been handed to the handler.
		if got := r.seen(); len(got) != 1 || got[0] != "add first initial=true" {
			t.Fatalf("after sync a handler saw %q", got)
		}
	}
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, pod("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := pod("second")
	second.Labels = map[string]string{"changed": "yes"}
	if _, err := pods.Update(ctx, second, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add first initial=true", "add second initial=false", "update second", "delete first"}
	for _, r := range recorders {
		waitFor(t, r, want)
	}
}

// TestHandlerAddedLaterIsReplayedTheCache: once events have been delivered, a new
// handler cannot join the shared listener without missing them; it gets its own and
// sees every object already there.
func TestHandlerAddedLaterIsReplayedTheCache(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(pod("first"))
	f := NewFactory(informers.NewSharedInformerFactory(client, 0))
	early := &recorder{}
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(early); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	waitFor(t, early, []string{"add first initial=true"})

	late := &recorder{}
	reg, err := inf.AddEventHandler(late)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("the late handler never synced")
	}
	waitFor(t, late, []string{"add first initial=true"})
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, late, []string{"add first initial=true", "add second initial=false"})
	waitFor(t, early, []string{"add first initial=true", "add second initial=false"})
}

// TestRemovedHandlerHearsNothingMore: removing one shared handler leaves the others.
func TestRemovedHandlerHearsNothingMore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	f := NewFactory(informers.NewSharedInformerFactory(client, 0))
	inf := f.Core().V1().Pods().Informer()
	kept, removed := &recorder{}, &recorder{}
	if _, err := inf.AddEventHandler(kept); err != nil {
		t.Fatal(err)
	}
	reg, err := inf.AddEventHandler(removed)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, pod("one"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, removed, []string{"add one initial=false"})
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("two"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, kept, []string{"add one initial=false", "add two initial=false"})
	if got := removed.seen(); len(got) != 1 {
		t.Errorf("the removed handler saw %q after its removal", got)
	}
}
