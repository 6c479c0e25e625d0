package spreadindex

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"mizzen/internal/scheduler/framework"
)

func nodeInfo(name string, nodeLabels map[string]string, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels}})
	for _, p := range pods {
		ni.AddPod(p)
	}
	return ni
}

func pod(name, ns string, kv ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

// TestLookupCountsDomains: zero-count domains are kept, nodes lacking a key of the key
// set take no part, other namespaces and terminating pods are not counted, and a
// kept entry follows pod and node changes.
func TestLookupCountsDomains(t *testing.T) {
	terminating := pod("t", "default", "app", "web")
	now := metav1.Now()
	terminating.DeletionTimestamp = &now
	nodes := []*framework.NodeInfo{
		nodeInfo("a1", map[string]string{"zone": "a", "rack": "1"}, pod("w1", "default", "app", "web"), pod("w2", "other", "app", "web"), terminating),
		nodeInfo("a2", map[string]string{"zone": "a"}, pod("w3", "default", "app", "web")),
		nodeInfo("b1", map[string]string{"zone": "b", "rack": "2"}),
	}
	x := New()
	for _, ni := range nodes {
		x.Update(nil, ni)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	e := x.Lookup("default", sel, "zone", KeySet([]string{"zone", "rack", "zone"}), nodes)
	if got, want := fmt.Sprint(e.Domains()), "map[a:1 b:0]"; got != want {
		t.Errorf("zone and rack: %s, want %s", got, want)
	}
	if e.OnNode("a2") != 1 || e.OnNode("a1") != 1 || e.OnNode("b1") != 0 {
		t.Errorf("per node: a1 %d a2 %d b1 %d", e.OnNode("a1"), e.OnNode("a2"), e.OnNode("b1"))
	}
	zoneOnly := x.Lookup("default", sel, "zone", []string{"zone"}, nodes)
	if got, want := fmt.Sprint(zoneOnly.Domains()), "map[a:2 b:0]"; got != want {
		t.Errorf("zone: %s, want %s", got, want)
	}
	// b1 gets a web pod; a2 goes.
	b1 := nodeInfo("b1", map[string]string{"zone": "b", "rack": "2"}, pod("w4", "default", "app", "web"))
	x.Update(nodes[2], b1)
	x.Update(nodes[1], nil)
	nodes = []*framework.NodeInfo{nodes[0], b1}
	x.Finish()
	if err := x.Check(nodes); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(zoneOnly.Domains()), "map[a:1 b:1]"; got != want {
		t.Errorf("zone after changes: %s, want %s", got, want)
	}
}

// TestEntriesBounded: at most maxEntries entries, the least recently read dropped first,
// and entries not read for idleRefreshes refreshes go.
func TestEntriesBounded(t *testing.T) {
	x := New()
	nodes := []*framework.NodeInfo{nodeInfo("n", map[string]string{"zone": "a"})}
	for i := range maxEntries + 5 {
		x.Lookup("default", labels.SelectorFromSet(labels.Set{"app": fmt.Sprint(i)}), "zone", []string{"zone"}, nodes)
		x.Finish()
	}
	if x.Len() != maxEntries {
		t.Fatalf("%d entries, want %d", x.Len(), maxEntries)
	}
	if _, ok := x.entries[entryKey("default", labels.SelectorFromSet(labels.Set{"app": "0"}), "zone", []string{"zone"})]; ok {
		t.Errorf("the least recently read entry is still kept")
	}
	for range idleRefreshes + 1 {
		x.Finish()
	}
	if x.Len() != 0 {
		t.Errorf("%d idle entries kept", x.Len())
	}
}

// TestSelectorKey: everything and nothing differ.
func TestSelectorKey(t *testing.T) {
	if SelectorKey(labels.Everything()) == SelectorKey(labels.Nothing()) {
		t.Errorf("labels.Everything and labels.Nothing share a key")
	}
}
