package kubelet

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

// TestNodeStatusReadsTheCacheFirst checks the node status update's reads: the first
// from the apiserver's cache (resourceVersion "0", as upstream's kubelet), and after a
// conflict (the cached node was stale) the latest.
func TestNodeStatusReadsTheCacheFirst(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var reads []string
	conflicts, updates := 0, 0
	h.client.PrependReactor("get", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		reads = append(reads, action.(clienttesting.GetActionImpl).GetOptions.ResourceVersion)
		mu.Unlock()
		return false, nil, nil
	})
	h.client.PrependReactor("update", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		updates++
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(v1.Resource("nodes"), testNode, nil)
		}
		return false, nil, nil
	})
	h.start()
	h.eventually("a status update after a conflicting one", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return updates >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if len(reads) < 2 || reads[0] != "0" || reads[1] != "" {
		t.Fatalf("the status update read the node with resourceVersions %q; want \"0\", then \"\" after the conflict", reads)
	}
}

// TestRegistrationReadsPastACacheBehind: under load the apiserver's cache may not have
// the node the kubelet just created when registration posts its status; the cached
// read's NotFound is followed at once by a consistent read, not by the registration
// failing and the node being created again ten seconds later (with its Lease).
func TestRegistrationReadsPastACacheBehind(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var reads []string
	creates := 0
	h.client.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		creates++
		mu.Unlock()
		return false, nil, nil
	})
	h.client.PrependReactor("get", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		rv := action.(clienttesting.GetActionImpl).GetOptions.ResourceVersion
		mu.Lock()
		defer mu.Unlock()
		reads = append(reads, rv)
		if rv == "0" {
			return true, nil, apierrors.NewNotFound(v1.Resource("nodes"), testNode)
		}
		return false, nil, nil
	})
	h.start()
	h.eventually("the node's Lease", func() bool {
		_, err := h.client.CoordinationV1().Leases(nodeLeaseNS).Get(context.Background(), testNode, metav1.GetOptions{})
		return err == nil
	})
	mu.Lock()
	defer mu.Unlock()
	if creates != 1 || len(reads) < 2 || reads[0] != "0" || reads[1] != "" {
		t.Fatalf("registration created the node %d times and read it with resourceVersions %q; want once, and \"0\" then \"\"", creates, reads)
	}
}

// An unchanged node status is posted every five minutes, as upstream's kubelet's
// nodeStatusReportFrequency: the Lease, renewed every 10 s, is the heartbeat. The
// first report after a change is shifted by up to half of that either way, so that
// nodes started together spread their reports.
func TestUnchangedNodeStatusPostedEveryFiveMinutes(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var posted []time.Time
	h.client.PrependReactor("update", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "status" {
			mu.Lock()
			posted = append(posted, h.clock.Now())
			mu.Unlock()
		}
		return false, nil, nil
	})
	h.start()
	h.eventually("the first status post", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(posted) > 0
	})
	for range 16 * 60 {
		h.clock.Step(time.Second)
		time.Sleep(3 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) < 3 {
		t.Fatalf("status posted at %v over sixteen minutes; want every five minutes", posted)
	}
	if gap := posted[1].Sub(posted[0]); gap < 150*time.Second || gap > 450*time.Second+20*time.Second {
		t.Errorf("the first unchanged report came %v after the last change (%v); want 2m30s to 7m30s", gap, posted)
	}
	for i := 2; i < len(posted); i++ {
		if gap := posted[i].Sub(posted[i-1]); gap < 5*time.Minute || gap > 5*time.Minute+20*time.Second {
			t.Errorf("status posts %v apart (%v); want five minutes (and a tick)", gap, posted)
		}
	}
}

// TestCordonEvents: the kubelet records NodeNotSchedulable when its node is cordoned
// and NodeSchedulable when it is uncordoned, as upstream's kubelet (kubectl describe
// node shows them).
func TestCordonEvents(t *testing.T) {
	h := newHarness(t)
	h.start()
	ctx := context.Background()
	reasons := func() []string {
		evs, _ := h.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		var out []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Node" && (e.Reason == "NodeNotSchedulable" || e.Reason == "NodeSchedulable") {
				out = append(out, e.Reason+": "+e.Message)
			}
		}
		return out
	}
	cordon := func(unschedulable bool) {
		node, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Spec.Unschedulable = unschedulable
		if _, err := h.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually("the node registered", func() bool {
		_, err := h.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		return err == nil
	})
	cordon(true)
	h.eventually("NodeNotSchedulable", func() bool { return len(reasons()) == 1 })
	cordon(false)
	h.eventually("NodeSchedulable", func() bool { return len(reasons()) == 2 })
	want := []string{"NodeNotSchedulable: Node node-1 status is now: NodeNotSchedulable", "NodeSchedulable: Node node-1 status is now: NodeSchedulable"}
	if got := reasons(); !slices.Equal(got, want) && !slices.Equal(got, []string{want[1], want[0]}) {
		t.Errorf("events %q, want %q", got, want)
	}
}
