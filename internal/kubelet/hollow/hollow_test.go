package hollow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	testpoll "mizzen/internal/testing/poll"
)

func TestAddresses(t *testing.T) {
	for _, tt := range []struct {
		i        int
		ip, cidr string
	}{
		{0, "172.16.0.1", "10.64.0.0/24"},
		{255, "172.16.1.0", "10.64.255.0/24"},
		{999, "172.16.3.232", "10.67.231.0/24"},
	} {
		if got := nodeIP(tt.i); got != tt.ip {
			t.Errorf("nodeIP(%d) = %s, want %s", tt.i, got, tt.ip)
		}
		if got := podCIDR(tt.i); got != tt.cidr {
			t.Errorf("podCIDR(%d) = %s, want %s", tt.i, got, tt.cidr)
		}
	}
}

// TestHollowNodesRunPods starts a few hollow nodes on one fake clientset, binds pods to
// each, and waits for every node to be Ready and every pod Running.
func TestHollowNodesRunPods(t *testing.T) {
	const nodes, podsPerNode = 10, 30
	client := k8sfake.NewSimpleClientset()
	hub := &podHub{}
	hub.install(client)
	// Every node shares one Service informer: one list of Services, not one per node.
	var serviceLists atomic.Int32
	client.PrependReactor("list", "services", func(clienttesting.Action) (bool, apiruntime.Object, error) {
		serviceLists.Add(1)
		return false, nil, nil
	})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	ctx := runNodes(t, client, Options{Count: nodes})
	poll(t, "every kubelet watching pods", func() bool { return hub.count() >= nodes })
	for n := range nodes {
		for i := range podsPerNode {
			name := fmt.Sprintf("p-%d-%d", n, i)
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
				Spec: v1.PodSpec{NodeName: fmt.Sprintf("hollow-node-%d", n),
					Containers: []v1.Container{{Name: "c", Image: "pause:3.10"}}},
			}
			if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll(t, "all nodes Ready and pods Running", func() bool {
		nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nl.Items) != nodes {
			return false
		}
		for _, n := range nl.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || c.Type == v1.NodeReady && c.Status == v1.ConditionTrue
			}
			if !ready {
				return false
			}
		}
		return runningPods(ctx, client) == nodes*podsPerNode
	})
	if n := serviceLists.Load(); n != 1 {
		t.Errorf("%d nodes listed Services %d times, want once for all", nodes, n)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Informational: with the fake clientset every kubelet caches every pod (it ignores
	// field selectors), so this overstates what a hollow node costs against a real apiserver.
	t.Logf("heap per hollow node with %d pods: %.2f MiB", podsPerNode,
		float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(nodes)/(1<<20))
}

// runNodes runs the hollow nodes opts asks for on client, logging nowhere, until the
// test ends; it returns a context that lasts as long.
func runNodes(t *testing.T, client kubernetes.Interface, opts Options) context.Context {
	t.Helper()
	opts.NewClient = func(string) (kubernetes.Interface, error) { return client, nil }
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ctx
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, 60*time.Second, 50*time.Millisecond, cond)
}

// runningPods counts the default namespace's Running pods (0 if the list fails).
func runningPods(ctx context.Context, client kubernetes.Interface) int {
	pl, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	running := 0
	for _, p := range pl.Items {
		if p.Status.Phase == v1.PodRunning {
			running++
		}
	}
	return running
}

// TestFirstIndex runs nodes from an index on, as the second of several hollow-nodes
// processes would: their names and addresses are those of their indexes.
func TestFirstIndex(t *testing.T) {
	client := k8sfake.NewSimpleClientset()
	ctx := runNodes(t, client, Options{Count: 2, FirstIndex: 256})
	want := map[string]string{"hollow-node-256": "172.16.1.1", "hollow-node-257": "172.16.1.2"}
	poll(t, "nodes 256 and 257 registered with their addresses", func() bool {
		nl, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nl.Items) != len(want) {
			return false
		}
		for _, n := range nl.Items {
			if len(n.Status.Addresses) == 0 || want[n.Name] != n.Status.Addresses[0].Address {
				return false
			}
		}
		return true
	})
}

func TestFirstIndexOutOfRange(t *testing.T) {
	for _, opts := range []Options{{Count: 1, FirstIndex: -1}, {Count: 2, FirstIndex: 16383}} {
		opts.NewClient = func(string) (kubernetes.Interface, error) { return k8sfake.NewSimpleClientset(), nil }
		if err := Run(context.Background(), opts); err == nil {
			t.Errorf("Run with FirstIndex %d, Count %d: no error", opts.FirstIndex, opts.Count)
		}
	}
}
