package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/scheduler/framework"
)

func TestBackoffDuration(t *testing.T) {
	q := New(Options{Clock: clocktesting.NewFakeClock(time.Now())})
	for _, tt := range []struct {
		attempts int
		want     time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {30, 10 * time.Second}} {
		if got := q.backoffDuration(&framework.QueuedPodInfo{Attempts: tt.attempts}); got != tt.want {
			t.Errorf("attempts %d: back-off %v, want %v", tt.attempts, got, tt.want)
		}
	}
}

func TestPopBlocksUntilAddOrCancel(t *testing.T) {
	q := New(Options{Clock: clocktesting.NewFakeClock(time.Now())})
	got := make(chan string, 1)
	go func() {
		p, err := q.Pop(context.Background())
		if err == nil {
			got <- p.Pod.Name
		}
	}()
	q.Add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "late", UID: "late"}})
	select {
	case name := <-got:
		if name != "late" {
			t.Errorf("popped %q", name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Pop did not return after Add")
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := q.Pop(ctx)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Pop returned %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Pop did not return after cancel")
	}
}

func TestNominator(t *testing.T) {
	q := New(Options{Clock: clocktesting.NewFakeClock(time.Now())})
	mk := func(name, nominated string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		p.Status.NominatedNodeName = nominated
		return p
	}
	a := mk("a", "n1")
	q.Add(a)
	q.AddNominatedPod(framework.NewPodInfo(mk("b", "")), "n1")
	if got := len(q.NominatedPodsForNode("n1")); got != 2 {
		t.Fatalf("n1 has %d nominated pods, want 2", got)
	}
	// a's nomination moves to n2 through a status update.
	q.Update(a, mk("a", "n2"))
	if len(q.NominatedPodsForNode("n1")) != 1 || len(q.NominatedPodsForNode("n2")) != 1 {
		t.Errorf("after update: n1=%d n2=%d, want 1 and 1", len(q.NominatedPodsForNode("n1")), len(q.NominatedPodsForNode("n2")))
	}
	q.Delete(a)
	q.DeleteNominatedPodIfExists(mk("b", ""))
	if len(q.NominatedPodsForNode("n1"))+len(q.NominatedPodsForNode("n2")) != 0 {
		t.Error("nominations remain after deletes")
	}
}
