package storage_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/etcd"
	"mizzen/internal/storage"
)

// newPodCache starts an etcd member (closed when the test ends) and a cache of pods
// on it, not yet running.
func newPodCache(t *testing.T) (*etcd.Member, *storage.Cache) {
	t.Helper()
	_, member := startMember(t)
	return member, storage.NewCache(member.Client(), []storage.ResourceConfig{{
		Segment: "pods",
		Kind:    corev1.SchemeGroupVersion.WithKind("Pod"),
		New:     func() runtime.Object { return &corev1.Pod{} },
		Fields:  func(runtime.Object) storage.Pairs { return nil },
	}}, slog.Default())
}

// TestWatchAfterStopIsRefused: once the cache has stopped, open watches end and a new
// one is refused. A watch accepted then would never end, and would hold its HTTP
// request, and the server's graceful shutdown, open until the deadline.
func TestWatchAfterStopIsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, cache := newPodCache(t)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = cache.Run(runCtx); close(ran) }()
	<-cache.Ready()

	open, err := cache.Watch("pods", storage.WatchOptions{KeyPrefix: storage.Prefix + "pods/"})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	<-ran
	waitCtx, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	if _, err := open.Next(waitCtx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a watch open when the cache stopped: Next gave %v, want it ended", err)
	}
	// The stop of open watches runs beside Run's return; a watch started after it must
	// be refused rather than wait forever.
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := cache.Watch("pods", storage.WatchOptions{KeyPrefix: storage.Prefix + "pods/"})
		if errors.Is(err, storage.ErrStopped) {
			return
		}
		if err != nil {
			t.Fatalf("watch after stop: %v, want ErrStopped", err)
		}
		cache.StopWatch(w)
		if time.Now().After(deadline) {
			t.Fatal("a watch started after the cache stopped was accepted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSelectorsMayReadTheCache: a watch's or a list's selector runs outside the cache's
// lock. A custom resource's field selector may convert the object through a conversion
// webhook, whose service lookup reads the cache; run under the lock that apply holds,
// it deadlocked every read and write of the server (seen in the conformance suite's
// selectable-fields spec).
func TestSelectorsMayReadTheCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member, cache := newPodCache(t)
	go func() { _ = cache.Run(ctx) }()
	<-cache.Ready()

	readsTheCache := func(e *storage.Entry) bool {
		_, _, err := cache.Get("pods", storage.Prefix+"pods/default/other")
		return err == nil && e.Key == storage.Prefix+"pods/default/wanted"
	}
	w, err := cache.Watch("pods", storage.WatchOptions{KeyPrefix: storage.Prefix + "pods/", Match: readsTheCache})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.StopWatch(w)
	for _, name := range []string{"other", "wanted"} {
		if _, err := member.Client().Put(ctx, storage.Prefix+"pods/default/"+name, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"`+name+`","namespace":"default"}}`); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("the watch never delivered its event (the cache deadlocked?): %v", err)
	}
	if len(evs) != 1 || evs[0].Entry.Key != storage.Prefix+"pods/default/wanted" {
		t.Fatalf("events %v, want only the wanted pod's", evs)
	}
	list, _, err := cache.List("pods", storage.Prefix+"pods/", readsTheCache)
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %d entries, %v; want the wanted pod", len(list), err)
	}
}

// TestEntriesKeepOnlyTheirEncoding: a cache given the protobuf encoding of responses
// keeps each pod as that encoding alone, and gives back, on every read, a fresh pod
// equal to the one stored (at the entry's resourceVersion), for additions, changes
// and deletions (reported at the deletion's revision) alike.
func TestEntriesKeepOnlyTheirEncoding(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, member := startMember(t)
	encodes := 0
	cache := storage.NewCache(member.Client(), []storage.ResourceConfig{{
		Segment: "pods",
		Kind:    corev1.SchemeGroupVersion.WithKind("Pod"),
		New:     func() runtime.Object { return &corev1.Pod{} },
		Protobuf: func(obj runtime.Object) ([]byte, error) {
			encodes++
			raw, err := obj.(*corev1.Pod).Marshal()
			if err != nil {
				return nil, err
			}
			unknown := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Pod"}, Raw: raw}
			data, err := unknown.Marshal()
			return append(append([]byte(nil), storage.ProtobufPrefix...), data...), err
		},
	}}, slog.Default())
	// Making the cache encodes one probe, to learn how the encoder wraps a pod.
	encodes = 0
	go func() { _ = cache.Run(ctx) }()
	<-cache.Ready()
	w, err := cache.Watch("pods", storage.WatchOptions{KeyPrefix: storage.Prefix + "pods/"})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.StopWatch(w)

	key := storage.Prefix + "pods/default/p"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
	put := func(p *corev1.Pod) int64 {
		data, err := storage.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := member.Client().Put(ctx, key, string(data))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	var want []*corev1.Pod
	rv := put(pod)
	want = append(want, withRV(pod, rv))
	changed := pod.DeepCopy()
	changed.Status.Phase = corev1.PodRunning
	rv = put(changed)
	want = append(want, withRV(changed, rv))
	resp, err := member.Client().Delete(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, withRV(changed, resp.Header.Revision))

	var got []*storage.Event
	for len(got) < len(want) {
		evs, err := w.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, evs...)
	}
	for i, ev := range got {
		first, err := ev.Entry.Object()
		if err != nil {
			t.Fatal(err)
		}
		second, _ := ev.Entry.Object()
		if first == second {
			t.Errorf("event %d: the entry gave the same object twice, not a fresh decoding", i)
		}
		if !equality.Semantic.DeepEqual(first, want[i]) {
			t.Errorf("event %d (%s): got %+v\nwant %+v", i, ev.Type, first, want[i])
		}
		if ev.Entry.Labels.Get("app") != "a" {
			t.Errorf("event %d: labels %v", i, ev.Entry.Labels)
		}
	}
	if encodes != len(want) {
		t.Errorf("%d encodings for %d versions: each version is encoded once, when it enters the cache", encodes, len(want))
	}
}

func withRV(p *corev1.Pod, rv int64) *corev1.Pod {
	out := p.DeepCopy()
	out.ResourceVersion = strconv.FormatInt(rv, 10)
	out.APIVersion, out.Kind = "v1", "Pod"
	return out
}

// TestIndexedWatchersSeeWhatTheirSelectorSees: watchers indexed by a pod's node (as
// every kubelet's watch is) see the same events as an unindexed watcher with the same
// selector, when a pod is created unassigned, bound, and deleted, and another pod lands
// on another node: the binding is ADDED for the node's watcher and DELETED for the
// watcher of unassigned pods.
func TestIndexedWatchersSeeWhatTheirSelectorSees(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, member := startMember(t)
	cache := storage.NewCache(member.Client(), []storage.ResourceConfig{{
		Segment: "pods", Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		New: func() runtime.Object { return &corev1.Pod{} },
		Fields: func(obj runtime.Object) storage.Pairs {
			return storage.Pairs{"spec.nodeName", obj.(*corev1.Pod).Spec.NodeName}
		},
		IndexedField: "spec.nodeName",
	}}, slog.Default())
	go func() { _ = cache.Run(ctx) }()
	<-cache.Ready()

	on := func(node string) func(*storage.Entry) bool {
		return func(e *storage.Entry) bool { return e.Fields.Get("spec.nodeName") == node }
	}
	watch := func(node string, indexed bool) *storage.Watcher {
		w, err := cache.Watch("pods", storage.WatchOptions{KeyPrefix: storage.Prefix + "pods/", Match: on(node), Indexed: indexed, IndexValue: node})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cache.StopWatch(w) })
		return w
	}
	watchers := map[string]*storage.Watcher{
		"n1 indexed": watch("n1", true), "n1 unindexed": watch("n1", false),
		"unassigned indexed": watch("", true), "unassigned unindexed": watch("", false),
	}
	put := func(name, node string) {
		pod := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"default"},"spec":{"nodeName":"` + node + `"}}`
		if _, err := member.Client().Put(ctx, storage.Prefix+"pods/default/"+name, pod); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "")
	put("a", "n1")
	put("b", "n2")
	if _, err := member.Client().Delete(ctx, storage.Prefix+"pods/default/a"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"n1 indexed": {"ADDED a", "DELETED a"}, "n1 unindexed": {"ADDED a", "DELETED a"},
		"unassigned indexed": {"ADDED a", "DELETED a"}, "unassigned unindexed": {"ADDED a", "DELETED a"},
	}
	for name, w := range watchers {
		var got []string
		for {
			next, cancelNext := context.WithTimeout(ctx, time.Second)
			evs, err := w.Next(next)
			cancelNext()
			if err != nil {
				break
			}
			for _, ev := range evs {
				obj, err := ev.Entry.Object()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(ev.Type)+" "+obj.(*corev1.Pod).Name)
			}
		}
		if strings.Join(got, ", ") != strings.Join(want[name], ", ") {
			t.Errorf("watcher %s saw %v, want %v", name, got, want[name])
		}
	}
}

// TestStatsCountAndSize: the cache's stats count a resource's objects and average
// their sizes as stored in etcd, through the initial load, additions, replacements
// and deletions.
func TestStatsCountAndSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	member, cache := newPodCache(t)
	pod := func(name, pad string) string {
		return `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"default","labels":{"pad":"` + pad + `"}}}`
	}
	put := func(name, value string) int64 {
		resp, err := member.Client().Put(ctx, storage.Prefix+"pods/default/"+name, value)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	sizes := map[string]int{}
	want := func(rev int64) {
		t.Helper()
		if err := cache.WaitFresh(ctx, rev, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, n := range sizes {
			sum += n
		}
		count, avg, ok := cache.Stats("pods")
		if !ok || count != len(sizes) || avg != int64(sum/max(len(sizes), 1)) {
			t.Fatalf("stats: %d objects averaging %d bytes (ok %v), want %d averaging %d", count, avg, ok, len(sizes), sum/max(len(sizes), 1))
		}
	}
	a := pod("a", "x")
	sizes["a"] = len(a)
	rev := put("a", a)
	go func() { _ = cache.Run(ctx) }()
	<-cache.Ready()
	want(rev)
	b := pod("b", strings.Repeat("y", 60))
	sizes["b"] = len(b)
	want(put("b", b))
	a2 := pod("a", strings.Repeat("z", 63))
	sizes["a"] = len(a2)
	want(put("a", a2))
	resp, err := member.Client().Delete(ctx, storage.Prefix+"pods/default/b")
	if err != nil {
		t.Fatal(err)
	}
	delete(sizes, "b")
	want(resp.Header.Revision)
	if _, _, ok := cache.Stats("nothing"); ok {
		t.Error("stats of a resource not cached: ok")
	}
}
