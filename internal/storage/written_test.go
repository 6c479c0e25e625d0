package storage_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"mizzen/internal/registry"
	"mizzen/internal/registry/catalog"
	"mizzen/internal/storage"
)

// protobufEncoder is what the apiserver gives the cache as ResourceConfig.Protobuf:
// apimachinery's protobuf serializer over a scheme of the resources' kinds.
func protobufEncoder(resources []*registry.Resource) func(runtime.Object) ([]byte, error) {
	scheme := runtime.NewScheme()
	for _, r := range resources {
		if !scheme.Recognizes(r.GroupVersionKind()) {
			scheme.AddKnownTypeWithName(r.GroupVersionKind(), r.New())
		}
	}
	ser := protobuf.NewSerializer(scheme, scheme)
	return func(obj runtime.Object) ([]byte, error) {
		var buf bytes.Buffer
		err := ser.Encode(obj, &buf)
		return buf.Bytes(), err
	}
}

// cacheConfig is a resource's cache settings as the apiserver makes them.
func cacheConfig(r *registry.Resource, encode func(runtime.Object) ([]byte, error)) *storage.ResourceConfig {
	return &storage.ResourceConfig{
		Segment: r.Resource, Kind: r.GroupVersionKind(), New: r.New, Protobuf: encode,
		Fields: func(obj runtime.Object) storage.Pairs {
			set := fields.Set{}
			if r.Fields != nil {
				set = r.Fields(obj)
			}
			set["metadata.name"] = obj.(metav1.Object).GetName()
			return storage.PairsOf(set)
		},
	}
}

// randomObjects fills API objects with random content (a fixed seed, so a failure
// repeats): any strings, lists and maps, valid quantities and times.
func randomObjects(seed int64) *randfill.Filler {
	return randfill.New().NilChance(0.3).NumElements(0, 3).MaxDepth(8).
		RandSource(rand.NewSource(seed)).
		Funcs(
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewQuantity(c.Int63n(1000), resource.DecimalSI)
			},
			func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(c.Int63n(2e9), 0) },
			func(tm *metav1.MicroTime, c randfill.Continue) {
				*tm = metav1.NewMicroTime(metav1.Unix(c.Int63n(2e9), 0).Time)
			},
			func(x *intstr.IntOrString, c randfill.Continue) {
				if c.Bool() {
					*x = intstr.FromInt32(c.Int31n(100))
				} else {
					*x = intstr.FromString(c.String(5))
				}
			},
			func(raw *runtime.RawExtension, c randfill.Continue) { *raw = runtime.RawExtension{} },
		)
}

// TestPutEntryIsTheDecodedOne: for random objects of every built-in kind, the entry
// the cache builds from a record of its own server's put (the stored message with
// the revision spliced in, wrapped as the encoder wraps it) is the entry it builds by
// decoding the stored value and encoding the object: the same encoding byte for byte
// (what every protobuf response and watch event carries), labels, fields and version.
func TestPutEntryIsTheDecodedOne(t *testing.T) {
	all := catalog.All()
	encode := protobufEncoder(all)
	const perKind = 64
	built := 0
	var skipped []string
	for i, r := range all {
		if _, ok := r.New().(*unstructured.Unstructured); ok || r.StorageResource != nil {
			continue
		}
		cfg := cacheConfig(r, encode)
		if !storage.Wraps(cfg) {
			skipped = append(skipped, r.Kind)
			continue
		}
		f := randomObjects(int64(i))
		for n := 0; n < perKind; n++ {
			obj := r.New()
			f.Fill(obj)
			acc, err := meta.Accessor(obj)
			if err != nil {
				t.Fatalf("%s: %v", r.Kind, err)
			}
			acc.SetResourceVersion(strconv.Itoa(n)) // the store clears it
			value, err := storage.EncodeForStore(obj)
			if err != nil {
				t.Fatalf("%s: %v", r.Kind, err)
			}
			// Revisions of every length, up to the largest an int64 holds.
			rev := int64(1)
			for d := n; d > 0; d-- {
				rev = rev*10 + int64(d)
			}
			if n == perKind-1 {
				rev = 1<<63 - 1
			}
			key := "/registry/" + r.Resource + "/x"
			fast, slow, err := storage.BuiltBothWays(cfg, key, value, rev,
				func() storage.Pairs { return cfg.Fields(obj) }, storage.PairsOf(acc.GetLabels()))
			if err != nil {
				t.Fatalf("%s: decoding: %v", r.Kind, err)
			}
			if fast == nil {
				t.Fatalf("%s: no entry from the put's record of %d bytes", r.Kind, len(value))
			}
			built++
			sameEntry(t, r.Kind, fast, slow, encode)
		}
	}
	// Only the kinds with maps of byte strings are decoded as before.
	if want := []string{"ConfigMap", "Secret"}; !equality.Semantic.DeepEqual(skipped, want) {
		t.Errorf("kinds whose puts are decoded: %v, want %v", skipped, want)
	}
	t.Logf("built %d entries from records", built)
}

// sameEntry fails the test unless a and b are alike in everything a reader sees.
func sameEntry(t *testing.T, what string, a, b *storage.Entry, encode func(runtime.Object) ([]byte, error)) {
	t.Helper()
	ea, err := a.Encoded(storage.ProtobufSlot, encode)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Encoded(storage.ProtobufSlot, encode)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ea, eb) {
		t.Fatalf("%s: encodings differ:\n%q\n%q", what, ea, eb)
	}
	if a.Key != b.Key || a.RV != b.RV || !equality.Semantic.DeepEqual(a.Labels, b.Labels) || !equality.Semantic.DeepEqual(a.Fields, b.Fields) {
		t.Fatalf("%s: entries differ: %+v and %+v", what, a, b)
	}
	oa, err := a.Object()
	if err != nil {
		t.Fatal(err)
	}
	ob, err := b.Object()
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(oa, ob) {
		t.Fatalf("%s: objects differ", what)
	}
}

// TestWriterAndCacheShareOnePutsEntry: whichever of the cache (the put's event) and the
// writer (the put's answer) asks first for the entry of a put, both get the same one,
// so a create's response and the cache never hold two entries of one version.
func TestWriterAndCacheShareOnePutsEntry(t *testing.T) {
	cfg := podsCacheConfig()
	value, err := storage.EncodeForStore(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cacheFirst := range []bool{true, false} {
		cacheGot, writerGot := storage.EntriesOfOnePut(cfg, storage.Prefix+"pods/default/p", value, 42, cacheFirst)
		if cacheGot == nil || cacheGot != writerGot || cacheGot.RV != 42 {
			t.Errorf("cache first %v: the cache got %p, the writer %p", cacheFirst, cacheGot, writerGot)
		}
	}
}

// TestWithResourceVersionRefuses: a message without its metadata's resourceVersion
// exactly once and empty is not spliced.
func TestWithResourceVersionRefuses(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	empty, _ := pod.Marshal()
	pod.ResourceVersion = "7"
	set, _ := pod.Marshal()
	for name, msg := range map[string][]byte{
		"resourceVersion set":       set,
		"metadata twice":            append(bytes.Clone(empty), empty...),
		"truncated":                 empty[:len(empty)-1],
		"no metadata":               {0x12, 0x00},
		"metadata not length-delim": {0x08, 0x01},
		"nothing":                   nil,
	} {
		if out, ok := storage.WithResourceVersion(msg, 1); ok {
			t.Errorf("%s: spliced into %q", name, out)
		}
	}
	if _, ok := storage.WithResourceVersion(empty, 1); !ok {
		t.Error("a pod's stored message was refused")
	}
}

// FuzzWithResourceVersion: whatever the bytes, a splice that succeeds gives a message
// that decodes to the input's object with the revision as its resourceVersion.
func FuzzWithResourceVersion(f *testing.F) {
	for _, pod := range []*corev1.Pod{
		{},
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b", Labels: map[string]string{"x": "y"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: string(make([]byte, 200))}, Spec: corev1.PodSpec{NodeName: "n"}},
	} {
		msg, _ := pod.Marshal()
		f.Add(msg, int64(1))
		f.Add(msg, int64(1)<<40)
	}
	f.Fuzz(func(t *testing.T, msg []byte, rev int64) {
		if rev < 0 {
			rev = -rev
		}
		out, ok := storage.WithResourceVersion(msg, rev)
		if !ok {
			return
		}
		var in, got corev1.Pod
		inErr := in.Unmarshal(msg)
		gotErr := got.Unmarshal(out)
		if (inErr == nil) != (gotErr == nil) {
			t.Fatalf("decoding the input: %v; the spliced: %v", inErr, gotErr)
		}
		if inErr != nil {
			return
		}
		in.ResourceVersion = strconv.FormatInt(rev, 10)
		if !equality.Semantic.DeepEqual(&in, &got) {
			t.Fatalf("spliced message decodes to\n%+v\nwant\n%+v", got, in)
		}
	})
}

// TestCacheTakesItsOwnPuts: a cache made by the store follows the store's creates and
// updates without decoding them, and holds what it would have decoded; a failed
// create leaves nothing waiting.
func TestCacheTakesItsOwnPuts(t *testing.T) {
	ctx, member := startMember(t)
	store := storage.NewStore(member.Client())
	podResource := catalog.All()
	var pods *registry.Resource
	for _, r := range podResource {
		if r.Resource == "pods" && r.GroupVersion.Group == "" {
			pods = r
		}
	}
	encode := protobufEncoder([]*registry.Resource{pods})
	cfg := cacheConfig(pods, encode)
	cache := store.NewCache([]storage.ResourceConfig{*cfg}, slog.Default())
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = cache.Run(runCtx) }()
	<-cache.Ready()

	f := randomObjects(1)
	for i := 0; i < 20; i++ {
		pod := &corev1.Pod{}
		f.Fill(pod)
		pod.Name, pod.Namespace, pod.ResourceVersion = "p"+strconv.Itoa(i), "default", ""
		key := storage.Prefix + "pods/default/" + pod.Name
		if err := store.Create(ctx, key, pod); err != nil {
			t.Fatal(err)
		}
		if err := store.Create(ctx, key, pod.DeepCopy()); !errors.Is(err, storage.ErrAlreadyExists) {
			t.Fatalf("second create: %v", err)
		}
		if i%2 == 0 {
			if _, _, err := store.GuaranteedUpdate(ctx, key, func() runtime.Object { return &corev1.Pod{} }, func(cur runtime.Object) (runtime.Object, error) {
				p := cur.(*corev1.Pod)
				p.Labels = map[string]string{"updated": strconv.Itoa(i)}
				p.Spec.NodeName = "node"
				return p, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		rev, err := store.CurrentRevision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cache.WaitFresh(ctx, rev, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		got, _, err := cache.Get("pods", key)
		if err != nil {
			t.Fatal(err)
		}
		stored := &corev1.Pod{}
		if err := store.Get(ctx, key, stored); err != nil {
			t.Fatal(err)
		}
		value, err := storage.EncodeForStore(stored)
		if err != nil {
			t.Fatal(err)
		}
		_, want, err := storage.BuiltBothWays(cfg, key, value, got.RV, func() storage.Pairs { return nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameEntry(t, key, got, want, encode)
		if n, want := cache.EntriesFromPuts(), int64(i+1+(i+2)/2); n != want {
			t.Fatalf("after put %d: %d entries built from the store's puts, want every put's (%d)", i, n, want)
		}
		if n := cache.PendingPuts(); n != 0 {
			t.Fatalf("after put %d: %d puts still waited for, want 0 (each taken from its event or forgotten)", i, n)
		}
	}
}
