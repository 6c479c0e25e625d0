package storage_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"mizzen/internal/registry"
	"mizzen/internal/registry/catalog"
	"mizzen/internal/storage"
)

// TestUpdateFromAStaleCacheCopy: an update that starts from the watch cache's copy
// loses no write made meanwhile by another server (straight to etcd here, with the
// cache stopped so that its copy stays behind): the compare-and-put fails, the update
// runs again on etcd's object, and an error found on the stale copy is judged again
// on etcd's. An update that changes nothing writes nothing.
func TestUpdateFromAStaleCacheCopy(t *testing.T) {
	ctx, member := startMember(t)
	store := storage.NewStore(member.Client())
	cache, stop, done := runPodCache(ctx, store)

	key := storage.Prefix + "pods/default/p"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"v": "1"}}}
	if err := store.Create(ctx, key, pod); err != nil {
		t.Fatal(err)
	}
	rev, _ := store.CurrentRevision(ctx)
	if err := cache.WaitFresh(ctx, rev, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stop()
	<-done

	// Another server's write, which the stopped cache never sees.
	other := pod.DeepCopy()
	other.Labels["other"] = "yes"
	data, err := storage.EncodeForStore(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := member.Client().Put(ctx, key, string(data)); err != nil {
		t.Fatal(err)
	}
	newPod := func() runtime.Object { return &corev1.Pod{} }

	var seen []string
	updated, _, err := store.GuaranteedUpdate(ctx, key, newPod, func(cur runtime.Object) (runtime.Object, error) {
		p := cur.(*corev1.Pod)
		seen = append(seen, p.Labels["other"])
		if p.Labels["other"] != "yes" {
			return nil, errors.New("judged on a stale object")
		}
		p.Labels["mine"] = "yes"
		return p, nil
	})
	if err != nil {
		t.Fatalf("update: %v (the update saw other=%q)", err, seen)
	}
	if len(seen) != 2 || seen[0] != "" || seen[1] != "yes" {
		t.Errorf("the update saw other=%q, want the cache's stale copy, then etcd's", seen)
	}
	got := &corev1.Pod{}
	if err := store.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["other"] != "yes" || got.Labels["mine"] != "yes" || got.ResourceVersion != updated.(*corev1.Pod).ResourceVersion {
		t.Errorf("stored labels %v at %s (returned %s), want both writes", got.Labels, got.ResourceVersion, updated.(*corev1.Pod).ResourceVersion)
	}

	// A stale copy whose update conflicts with nothing but changes nothing either.
	before, _ := store.CurrentRevision(ctx)
	same, _, err := store.GuaranteedUpdate(ctx, key, newPod, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
	if err != nil {
		t.Fatal(err)
	}
	after, _ := store.CurrentRevision(ctx)
	if after != before || same.(*corev1.Pod).ResourceVersion != got.ResourceVersion {
		t.Errorf("a no-op update moved the revision %d -> %d (returned rv %s, stored %s)", before, after, same.(*corev1.Pod).ResourceVersion, got.ResourceVersion)
	}
}

// TestNoOpUpdateFromTheCacheWritesNothing: an update that leaves the object as the
// cache (up to date) has it writes nothing and returns the stored version.
func TestNoOpUpdateFromTheCacheWritesNothing(t *testing.T) {
	ctx, member := startMember(t)
	store := storage.NewStore(member.Client())
	cache, stop, _ := runPodCache(ctx, store)
	defer stop()
	key := storage.Prefix + "pods/default/p"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	if err := store.Create(ctx, key, pod); err != nil {
		t.Fatal(err)
	}
	rev, _ := store.CurrentRevision(ctx)
	if err := cache.WaitFresh(ctx, rev, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		calls := 0
		got, _, err := store.GuaranteedUpdate(ctx, key, func() runtime.Object { return &corev1.Pod{} }, func(cur runtime.Object) (runtime.Object, error) {
			calls++
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		now, _ := store.CurrentRevision(ctx)
		if now != rev || got.(*corev1.Pod).ResourceVersion != pod.ResourceVersion || calls != 1 {
			t.Errorf("no-op update: revision %d -> %d, returned rv %s (stored %s), update ran %d times", rev, now, got.(*corev1.Pod).ResourceVersion, pod.ResourceVersion, calls)
		}
	}
}

// runPodCache runs a watch cache of pods, kept as protobuf, on store until stop is
// called; done is closed when it has stopped.
func runPodCache(ctx context.Context, store *storage.Store) (cache *storage.Cache, stop context.CancelFunc, done chan struct{}) {
	return runPodCacheKeeping(ctx, store, false)
}

// podsCacheConfig is the cache's configuration of core pods, kept as protobuf.
func podsCacheConfig() *storage.ResourceConfig {
	var pods *registry.Resource
	for _, r := range catalog.All() {
		if r.Resource == "pods" && r.GroupVersion.Group == "" {
			pods = r
		}
	}
	return cacheConfig(pods, protobufEncoder([]*registry.Resource{pods}))
}

// runPodCacheKeeping is runPodCache with ResourceConfig.KeepDecoded as keepDecoded.
func runPodCacheKeeping(ctx context.Context, store *storage.Store, keepDecoded bool) (cache *storage.Cache, stop context.CancelFunc, done chan struct{}) {
	cfg := podsCacheConfig()
	cfg.KeepDecoded = keepDecoded
	cache = store.NewCache([]storage.ResourceConfig{*cfg}, slog.Default())
	runCtx, stop := context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { _ = cache.Run(runCtx); close(done) }()
	<-cache.Ready()
	return cache, stop, done
}

// TestKeptObjectsAreSharedButUpdatesGetTheirOwn: an entry of a resource kept decoded
// (KeepDecoded) gives every reader the same object, decoded once, while an update
// starting from the cache still changes a copy of its own: the object the readers
// share is as it was.
func TestKeptObjectsAreSharedButUpdatesGetTheirOwn(t *testing.T) {
	ctx, member := startMember(t)
	store := storage.NewStore(member.Client())
	cache, stop, done := runPodCacheKeeping(ctx, store, true)
	defer func() { stop(); <-done }()

	key := storage.Prefix + "pods/default/p"
	if err := store.Create(ctx, key, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"v": "1"}}}); err != nil {
		t.Fatal(err)
	}
	// latest is the cache's entry of the pod once the cache has seen every write, and
	// that entry's object.
	latest := func() (*storage.Entry, runtime.Object) {
		t.Helper()
		rev, _ := store.CurrentRevision(ctx)
		if err := cache.WaitFresh(ctx, rev, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		e, _, err := cache.Get("pods", key)
		if err != nil || e == nil {
			t.Fatalf("cache entry %v, %v", e, err)
		}
		obj, err := e.Object()
		if err != nil {
			t.Fatal(err)
		}
		return e, obj
	}
	e, first := latest()
	if second, _ := e.Object(); second != first {
		t.Error("an entry kept decoded decoded its object again")
	}
	fromCache := false
	_, _, err := store.GuaranteedUpdate(ctx, key, func() runtime.Object { return &corev1.Pod{} }, func(cur runtime.Object) (runtime.Object, error) {
		fromCache = fromCache || cur == first
		cur.(*corev1.Pod).Labels["v"] = "2"
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fromCache {
		t.Error("the update was handed the object the cache's readers share")
	}
	if v := first.(*corev1.Pod).Labels["v"]; v != "1" {
		t.Errorf("the shared object's label is %q after the update, want it unchanged (1)", v)
	}

	// The deletion's event reports the last version at the deletion's revision, in an
	// entry of its own: the last version's shared object keeps its resourceVersion.
	_, lastObj := latest()
	lastRV := lastObj.(*corev1.Pod).ResourceVersion
	resp, err := member.Client().Delete(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.WaitFresh(ctx, resp.Header.Revision, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := lastObj.(*corev1.Pod).ResourceVersion; got != lastRV {
		t.Errorf("the last version's shared object has resourceVersion %s after the deletion, want %s", got, lastRV)
	}
}

// TestCacheKeepsTheCreatesEntry: the entry a create returns is the one the cache then
// holds for the object, not a second one made when the put's event came back, and it
// holds the created pod at its revision.
func TestCacheKeepsTheCreatesEntry(t *testing.T) {
	ctx, member := startMember(t)
	store := storage.NewStore(member.Client())
	cache, stop, done := runPodCache(ctx, store)
	defer func() { stop(); <-done }()

	key := storage.Prefix + "pods/default/p"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"v": "1"}}}
	created, err := store.CreateEntry(ctx, key, pod)
	if err != nil || created == nil {
		t.Fatalf("create: entry %v, %v", created, err)
	}
	if err := cache.WaitFresh(ctx, created.RV, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if e, _, err := cache.Get("pods", key); err != nil || e != created {
		t.Errorf("the cache holds %p (%v), not the create's entry %p", e, err, created)
	}
	obj, err := created.Object()
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*corev1.Pod); got.ResourceVersion != pod.ResourceVersion || got.Labels["v"] != "1" {
		t.Errorf("the entry holds resourceVersion %s and labels %v, the created pod %s", got.ResourceVersion, got.Labels, pod.ResourceVersion)
	}
}
