package queue

import (
	"context"
	"errors"
	"slices"
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

// Nominations come from preemption (AddNominatedPod) and from pods' status; the filter
// asks HasNominatedPods first and skips the per-node lookup when it is false.
func TestNominations(t *testing.T) {
	q := New(Options{Clock: clocktesting.NewFakeClock(time.Now())})
	pod := func(name, nominated string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
			Status: v1.PodStatus{NominatedNodeName: nominated}}
	}
	names := func(node string) []string {
		var out []string
		for _, pi := range q.NominatedPodsForNode(node) {
			out = append(out, pi.Pod.Name)
		}
		return out
	}
	steps := []struct {
		name    string
		do      func()
		wantHas bool
		wantN1  []string
		wantN2  []string
	}{
		{name: "nothing nominated", do: func() {}, wantHas: false},
		{name: "a pending pod without nomination", do: func() { q.Add(pod("plain", "")) }, wantHas: false},
		{name: "preemption nominates a to n1", do: func() { q.AddNominatedPod(framework.NewPodInfo(pod("a", "")), "n1") }, wantHas: true, wantN1: []string{"a"}},
		{name: "a status naming n2 moves it", do: func() { q.Update(pod("a", ""), pod("a", "n2")) }, wantHas: true, wantN2: []string{"a"}},
		{name: "an update of another pod changes nothing", do: func() { q.Update(pod("plain", ""), pod("plain", "")) }, wantHas: true, wantN2: []string{"a"}},
		{name: "the nomination is dropped", do: func() { q.DeleteNominatedPodIfExists(pod("a", "n2")) }, wantHas: false},
	}
	for _, st := range steps {
		st.do()
		if got := q.HasNominatedPods(); got != st.wantHas {
			t.Errorf("%s: HasNominatedPods %v, want %v", st.name, got, st.wantHas)
		}
		if got := names("n1"); !slices.Equal(got, st.wantN1) {
			t.Errorf("%s: n1 has %v, want %v", st.name, got, st.wantN1)
		}
		if got := names("n2"); !slices.Equal(got, st.wantN2) {
			t.Errorf("%s: n2 has %v, want %v", st.name, got, st.wantN2)
		}
	}
}
