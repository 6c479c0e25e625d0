package watchedobjects

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"mizzen/internal/testing/poll"
)

func configMapManager(client *fake.Clientset) *Manager {
	return New(Options{
		Resource:     v1.Resource("configmaps"),
		ExpectedType: &v1.ConfigMap{},
		ListWatch: ListWatch{
			Client: client,
			List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
				return client.CoreV1().ConfigMaps(ns).List(ctx, o)
			},
			Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
				return client.CoreV1().ConfigMaps(ns).Watch(ctx, o)
			},
		},
		Refs: func(pod *v1.Pod) []string {
			var out []string
			for _, v := range pod.Spec.Volumes {
				if v.ConfigMap != nil {
					out = append(out, v.ConfigMap.Name)
				}
			}
			return out
		},
		Immutable:   func(obj runtime.Object) bool { cm := obj.(*v1.ConfigMap); return cm.Immutable != nil && *cm.Immutable },
		SyncTimeout: time.Minute, // generous: the fake answers at once, a loaded machine may not
	})
}

func podUsing(uid string, configMaps ...string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)}}
	for _, cm := range configMaps {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: cm, VolumeSource: v1.VolumeSource{
			ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}})
	}
	return pod
}

// requests counts the client's requests for configmaps by verb, and checks that every
// list and watch selected one object by name, as the Node authorizer requires.
func requests(t *testing.T, client *fake.Clientset) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "configmaps" {
			continue
		}
		out[a.GetVerb()]++
		var sel string
		switch a := a.(type) {
		case k8stesting.ListAction:
			sel = a.GetListRestrictions().Fields.String()
		case k8stesting.WatchAction:
			sel = a.GetWatchRestrictions().Fields.String()
		default:
			continue
		}
		if len(sel) < len("metadata.name=") || sel[:len("metadata.name=")] != "metadata.name=" {
			t.Errorf("%s of configmaps with field selector %q, want metadata.name=NAME", a.GetVerb(), sel)
		}
	}
	return out
}

func TestGetsComeFromOneWatchPerObject(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared"}, Data: map[string]string{"k": "1"}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "own"}, Data: map[string]string{"k": "a"}},
	)
	m := configMapManager(client)
	defer m.Stop()
	a, b := podUsing("a", "shared", "own", "shared"), podUsing("b", "shared")
	m.RegisterPod(a)
	m.RegisterPod(b)
	m.RegisterPod(a) // an update of the same pod adds no reference
	if got := m.Watching(); got != 2 {
		t.Fatalf("watching %d objects, want 2", got)
	}
	for range 50 {
		obj, ok, err := m.Get(ctx, "ns", "shared")
		if !ok || err != nil || obj.(*v1.ConfigMap).Data["k"] != "1" {
			t.Fatalf("Get shared = %v, %v, %v", obj, ok, err)
		}
	}
	if _, _, err := m.Get(ctx, "ns", "own"); err != nil {
		t.Fatal(err)
	}
	// A reflector starts its watch after its list has filled the store (which is what
	// Get waits for), so the second watch may still be on its way.
	var got map[string]int
	waitFor(t, func() bool { got = requests(t, client); return got["watch"] >= 2 })
	if got["get"] != 0 || got["list"] != 2 || got["watch"] != 2 {
		t.Errorf("requests %v, want one list and one watch per object and no get", got)
	}

	// A change arrives through the watch, without a request.
	cm, _ := client.CoreV1().ConfigMaps("ns").Get(ctx, "shared", metav1.GetOptions{})
	cm.Data["k"] = "2"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	waitFor(t, func() bool {
		obj, _, err := m.Get(ctx, "ns", "shared")
		return err == nil && obj.(*v1.ConfigMap).Data["k"] == "2"
	})
	if got := requests(t, client); len(got) != 0 {
		t.Errorf("requests after the change %v, want none", got)
	}

	// The pod that alone used "own" stops using it: its watch stops; "shared" stays.
	m.RegisterPod(podUsing("a", "shared"))
	if got := m.Watching(); got != 1 {
		t.Errorf("watching %d objects after a's update, want 1", got)
	}
	if _, ok, _ := m.Get(ctx, "ns", "own"); ok {
		t.Error(`"own" is still followed after its last pod dropped it`)
	}
	m.UnregisterPod(a.UID)
	if got := m.Watching(); got != 1 {
		t.Errorf("watching %d objects after a went, want 1 (b uses shared)", got)
	}
	m.UnregisterPod(b.UID)
	if got := m.Watching(); got != 0 {
		t.Errorf("watching %d objects after every pod went, want 0", got)
	}
	if _, ok, _ := m.Get(ctx, "ns", "shared"); ok {
		t.Error("Get of an object no pod refers to should say so (ok false)")
	}
}

func TestMissingObjectIsNotFoundUntilCreated(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	m := configMapManager(client)
	defer m.Stop()
	m.RegisterPod(podUsing("a", "later"))
	_, ok, err := m.Get(ctx, "ns", "later")
	if !ok || !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing object = %v, %v; want a NotFound error", ok, err)
	}
	if _, err := client.CoreV1().ConfigMaps("ns").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, _, err := m.Get(ctx, "ns", "later"); return err == nil })
	if got := requests(t, client); got["get"] != 0 {
		t.Errorf("requests %v, want no get", got)
	}
}

func TestImmutableObjectStopsItsWatch(t *testing.T) {
	ctx := context.Background()
	yes := true
	client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "frozen"}, Immutable: &yes, Data: map[string]string{"k": "v"}})
	m := configMapManager(client)
	defer m.Stop()
	m.RegisterPod(podUsing("a", "frozen"))
	for range 2 {
		obj, ok, err := m.Get(ctx, "ns", "frozen")
		if !ok || err != nil || obj.(*v1.ConfigMap).Data["k"] != "v" {
			t.Fatalf("Get frozen = %v, %v, %v", obj, ok, err)
		}
	}
	m.mu.Lock()
	it := m.objects[key{"ns", "frozen"}]
	m.mu.Unlock()
	select {
	case <-it.ctx.Done():
	default:
		t.Error("the watch of an immutable object is still running after it was read")
	}
}

// waitFor polls cond until it holds; the bound is a hang guard, not a timing claim.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, "the condition", time.Minute, 10*time.Millisecond, cond)
}

// Changed names the pods that refer to an object when it changes after its first
// list, and only those.
func TestChangedNamesThePodsOfAnObject(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	changed := make(chan []types.UID, 10)
	m := configMapManager(client)
	m.opts.Changed = func(pods []types.UID) { changed <- pods }
	defer m.Stop()
	m.RegisterPod(podUsing("p1", "a"))
	m.RegisterPod(podUsing("p2", "a"))
	// Another namespace's "a" (the fake ignores field selectors, not namespaces).
	other := podUsing("p3", "a")
	other.Namespace = "other"
	m.RegisterPod(other)
	if _, ok, err := m.Get(ctx, "ns", "a"); !ok || err != nil {
		t.Fatalf("Get: ok %v, err %v", ok, err)
	}
	// The fake drops events between a list and its watch: wait for both watches.
	waitFor(t, func() bool { return requests(t, client)["watch"] >= 2 })
	select {
	case pods := <-changed:
		t.Fatalf("Changed(%v) for the first list", pods)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case pods := <-changed:
		got := map[types.UID]bool{}
		for _, p := range pods {
			got[p] = true
		}
		if len(pods) != 2 || !got["p1"] || !got["p2"] {
			t.Errorf("Changed(%v), want p1 and p2", pods)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no Changed call for the update")
	}
}
