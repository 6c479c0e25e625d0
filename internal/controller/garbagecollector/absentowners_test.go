package garbagecollector

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
)

// gets counts the live GETs of a resource the collector made.
func (f *fixture) gets(resource string) int {
	n := 0
	for _, a := range f.meta.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// The pods of a deleted ReplicaSet are collected with one GET of it, not one each:
// a gone owner is remembered, as upstream's absent owner cache does.
func TestAGoneOwnerIsLookedUpOnce(t *testing.T) {
	var pods []*metav1.PartialObjectMetadata
	for i := range 3 {
		pods = append(pods, obj("v1", "Pod", "shop", fmt.Sprintf("web-1-%d", i), ownedBy("apps/v1", "ReplicaSet", "web-1", true, "")))
	}
	f := newFixture(t, pods)
	for _, p := range pods {
		f.sync(t, "pods", p.Namespace, p.Name)
	}
	if n := f.gets("replicasets"); n != 1 {
		t.Errorf("%d GETs of the gone ReplicaSet, want 1", n)
	}
	if got := f.writes(); len(got) != 3 {
		t.Errorf("writes %v, want the three pods deleted", got)
	}

	// An owner a live GET finds is not remembered: a lagging cache is asked again.
	rs := obj("apps/v1", "ReplicaSet", "shop", "web-2")
	pod := obj("v1", "Pod", "shop", "web-2-0", ownedBy("apps/v1", "ReplicaSet", "web-2", true, ""))
	f = newFixture(t, []*metav1.PartialObjectMetadata{pod}, rs)
	f.sync(t, "pods", "shop", "web-2-0")
	f.sync(t, "pods", "shop", "web-2-0")
	if n, w := f.gets("replicasets"), f.writes(); n != 2 || len(w) != 0 {
		t.Errorf("%d GETs and writes %v, want 2 GETs and nothing written", n, w)
	}
}

// An owner in another namespace is not remembered as gone: each of its dependents is
// reported, as before.
func TestAnOwnerInAnotherNamespaceIsReportedForEachDependent(t *testing.T) {
	f := newFixture(t, []*metav1.PartialObjectMetadata{obj("v1", "ConfigMap", "other", "settings"),
		obj("v1", "Pod", "shop", "p1", ownedBy("v1", "ConfigMap", "settings", false, "")),
		obj("v1", "Pod", "shop", "p2", ownedBy("v1", "ConfigMap", "settings", false, ""))})
	f.sync(t, "pods", "shop", "p1")
	f.sync(t, "pods", "shop", "p2")
	if n := len(f.events.Events); n != 2 {
		t.Errorf("%d events, want one per dependent", n)
	}
	var deletes int
	for _, a := range f.meta.Actions() {
		if _, ok := a.(clienttesting.DeleteAction); ok {
			deletes++
		}
	}
	if deletes != 2 {
		t.Errorf("%d deletes, want both pods collected", deletes)
	}
}

func TestAbsentOwnersForgetsTheOldestWhenFull(t *testing.T) {
	a := newAbsentOwners()
	for i := range absentOwnersSize + 1 {
		a.add("ns", types.UID(fmt.Sprint(i)))
	}
	if a.has("ns", "0") || !a.has("ns", "1") || !a.has("ns", types.UID(fmt.Sprint(absentOwnersSize))) || len(a.set) != absentOwnersSize {
		t.Errorf("after %d adds: has 0 %v, has 1 %v, size %d; want the first forgotten and %d kept",
			absentOwnersSize+1, a.has("ns", "0"), a.has("ns", "1"), len(a.set), absentOwnersSize)
	}
	if a.has("other", "1") {
		t.Error("an owner gone from one namespace is gone from another")
	}
}
