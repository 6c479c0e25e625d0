package fieldmanager_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/fieldmanager"
	"mizzen/internal/registry"
	"mizzen/internal/registry/catalog"
)

// libraryManagers are field managers that leave all of an update to the library:
// its validation, and its comparison of the live object with its managedFields.
func libraryManagers(t testing.TB) *fieldmanager.Managers {
	m := newManagers(t)
	m.LibraryOnly()
	return m
}

// TestUpdateMatchesTheLibraryOnRandomPairs updates random objects of every built-in
// kind (a fixed seed, so a failure repeats) with random changes, through the status
// subresource or the object itself, by managers that may or may not have written
// before, and checks that Managers.Update gives the library's managedFields, the
// entries' times aside. A third of the live objects have list items missing fields
// (keys among them), which the library's validation may reject. The live objects' managedFields come from a create and up to
// two earlier updates by other managers, made by the library.
func TestUpdateMatchesTheLibraryOnRandomPairs(t *testing.T) {
	fast, lib := newManagers(t), libraryManagers(t)
	const perKind = 6
	answered, pruned, all := 0, 0, 0
	for i, r := range catalog.All() {
		gvk := r.GroupVersionKind()
		if _, ok := r.New().(*unstructured.Unstructured); ok {
			continue
		}
		t.Run(gvk.String(), func(t *testing.T) {
			rnd := rand.New(rand.NewSource(int64(i)))
			f := randomFiller(int64(i))
			managers := []string{"creator", "kubelet", "controller", "kubectl-edit"}
			for n := 0; n < perKind; n++ {
				live := randomObject(t, r, f)
				live = lib.Update(gvk, "", newObject(t, gvk), live, "creator")
				live.(metav1.Object).SetUID("u")
				for k := rnd.Intn(3); k > 0; k-- {
					next := mutated(t, rnd, gvk, live, randomObject(t, r, f))
					live = lib.Update(gvk, randomSubresource(rnd, r), live, next, managers[1+rnd.Intn(3)])
				}
				if rnd.Intn(3) == 0 {
					live = broken(t, rnd, gvk, live)
				}
				obj := mutated(t, rnd, gvk, live, randomObject(t, r, f))
				if rnd.Intn(5) == 0 {
					// A client that sends no managedFields keeps the live ones.
					obj.(metav1.Object).SetManagedFields(nil)
				}
				sub, manager := randomSubresource(rnd, r), managers[rnd.Intn(4)]
				want := lib.Update(gvk, sub, live, obj.DeepCopyObject(), manager)
				got := fast.Update(gvk, sub, live, obj.DeepCopyObject(), manager)
				sameUpdate(t, fmt.Sprintf("update %d (%q by %s)", n, sub, manager), live, want, got)
				all++
				if fast.UpdateAnswersFast(gvk, live, obj) {
					answered++
				}
				if fast.ComparesWithoutCommonFields(gvk, live, obj) {
					pruned++
				}
			}
		})
	}
	t.Logf("of %d random updates, %d validated both objects without the library and compared the live one without its managedFields, %d left their common fields out of the comparison", all, answered, pruned)
	if answered*2 < all || pruned*4 < all {
		t.Errorf("the fast parts answered for %d and %d of %d random updates, want a half and a quarter at least", answered, pruned, all)
	}
}

// broken is obj with fields of its list items (outside metadata) dropped, keys among
// them: a live object the library's validation may reject (where the update is to
// keep its managedFields), in parts an update may or may not change.
func broken(t *testing.T, rnd *rand.Rand, gvk schema.GroupVersionKind, obj k8sruntime.Object) k8sruntime.Object {
	u, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range u {
		if k != "metadata" {
			dropItemFields(rnd, v, false)
		}
	}
	out := newObject(t, gvk)
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u, out); err != nil {
		return obj
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out
}

// randomObject is a random object of r's kind, defaulted.
func randomObject(t *testing.T, r *registry.Resource, f interface{ Fill(interface{}) }) k8sruntime.Object {
	gvk := r.GroupVersionKind()
	obj := newObject(t, gvk)
	f.Fill(obj)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	if r.Strategy != nil {
		r.Strategy.Default(obj)
	}
	return obj
}

func randomSubresource(rnd *rand.Rand, r *registry.Resource) string {
	if r.HasStatus && rnd.Intn(2) == 0 {
		return "status"
	}
	return ""
}

// mutated is live with random changes taken from other: fields removed, replaced or
// added, list items dropped, swapped, replaced or added, map keys renamed; the
// object's identity and managedFields stay live's, as a client's write keeps them.
func mutated(t *testing.T, rnd *rand.Rand, gvk schema.GroupVersionKind, live, other k8sruntime.Object) k8sruntime.Object {
	l, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		t.Fatal(err)
	}
	o, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(other)
	if err != nil {
		t.Fatal(err)
	}
	for tries := 0; tries < 20; tries++ {
		changed := deepCopyJSON(l)
		for k := 1 + rnd.Intn(4); k > 0; k-- {
			mutateMap(rnd, changed, o, 0)
		}
		if m, ok := changed["metadata"].(map[string]interface{}); ok {
			lm := l["metadata"].(map[string]interface{})
			for _, keep := range []string{"managedFields", "uid", "name", "namespace", "resourceVersion"} {
				if v, ok := lm[keep]; ok {
					m[keep] = v
				} else {
					delete(m, keep)
				}
			}
		} else {
			changed["metadata"] = l["metadata"]
		}
		obj := newObject(t, gvk)
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(changed, obj); err != nil {
			continue
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return obj
	}
	return live.DeepCopyObject()
}

// mutateMap changes one random field under m, taking new values from other (the same
// place in another random object) where it has them.
func mutateMap(rnd *rand.Rand, m, other map[string]interface{}, depth int) {
	keys := make([]string, 0, len(m)+len(other))
	for k := range m {
		keys = append(keys, k)
	}
	for k := range other {
		if _, ok := m[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	sortStrings(keys)
	k := keys[rnd.Intn(len(keys))]
	v, ov := m[k], other[k]
	switch {
	case v == nil && ov == nil:
		return
	case rnd.Intn(6) == 0 || depth > 6:
		delete(m, k)
	case rnd.Intn(5) == 0 && ov != nil:
		m[k] = deepCopyValue(ov)
	case rnd.Intn(8) == 0 && v != nil:
		// A map's key renamed (a field of a struct, the conversion drops).
		delete(m, k)
		m[k+"x"] = v
	default:
		switch vv := v.(type) {
		case map[string]interface{}:
			om, _ := ov.(map[string]interface{})
			mutateMap(rnd, vv, om, depth+1)
		case []interface{}:
			ol, _ := ov.([]interface{})
			m[k] = mutateList(rnd, vv, ol, depth+1)
		case nil:
			m[k] = deepCopyValue(ov)
		default:
			if ov != nil {
				m[k] = deepCopyValue(ov)
			} else {
				delete(m, k)
			}
		}
	}
}

func mutateList(rnd *rand.Rand, l, other []interface{}, depth int) []interface{} {
	switch op := rnd.Intn(5); {
	case op == 0 && len(l) > 0:
		i := rnd.Intn(len(l))
		return append(l[:i:i], l[i+1:]...)
	case op == 1 && len(l) > 1:
		i, j := rnd.Intn(len(l)), rnd.Intn(len(l))
		l[i], l[j] = l[j], l[i]
		return l
	case op == 2 && len(other) > 0:
		return append(l, deepCopyValue(other[rnd.Intn(len(other))]))
	case op == 3 && len(l) > 0 && len(other) > 0:
		l[rnd.Intn(len(l))] = deepCopyValue(other[rnd.Intn(len(other))])
		return l
	case len(l) > 0:
		i := rnd.Intn(len(l))
		if im, ok := l[i].(map[string]interface{}); ok {
			var om map[string]interface{}
			if len(other) > 0 {
				om, _ = other[rnd.Intn(len(other))].(map[string]interface{})
			}
			mutateMap(rnd, im, om, depth+1)
		}
	}
	return l
}

func deepCopyJSON(m map[string]interface{}) map[string]interface{} {
	return deepCopyValue(m).(map[string]interface{})
}

func deepCopyValue(v interface{}) interface{} {
	switch vv := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(vv))
		for k, x := range vv {
			out[k] = deepCopyValue(x)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(vv))
		for i, x := range vv {
			out[i] = deepCopyValue(x)
		}
		return out
	}
	return v
}

// sortStrings sorts s (an insertion sort: the lists are short).
func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestCommonUpdatesAnswerFast checks that the kubelet's and controllers' frequent
// writes (the benchmark's cases) take the update's own validation, compare the live
// object without its managedFields and, but for the lease's (which has only a spec),
// leave the unchanged half of the object out of the comparison; and that they give
// the library's managedFields.
func TestCommonUpdatesAnswerFast(t *testing.T) {
	fast, lib := newManagers(t), libraryManagers(t)
	for _, c := range updateCases {
		t.Run(c.name, func(t *testing.T) {
			live := storedLive(fast, c)
			next := live.DeepCopyObject()
			c.change(next)
			want := lib.Update(c.gvk, c.subresource, live, next.DeepCopyObject(), c.manager)
			got := fast.Update(c.gvk, c.subresource, live, next.DeepCopyObject(), c.manager)
			sameUpdate(t, "the first write", live, want, got)
			if !fast.UpdateAnswersFast(c.gvk, live, next) {
				t.Error("the update took the library's validation or compared the live managedFields")
			}
			if c.name != "LeaseRenew" && !fast.ComparesWithoutCommonFields(c.gvk, live, next) {
				t.Error("the update compared the fields live and the new object have equal")
			}
			// A second write by the same manager, on the first's result.
			live2 := got
			next2 := live2.DeepCopyObject()
			c.change(next2)
			next2.(metav1.Object).SetLabels(map[string]string{"round": fmt.Sprint(2)})
			want = lib.Update(c.gvk, "", live2, next2.DeepCopyObject(), c.manager)
			got = fast.Update(c.gvk, "", live2, next2.DeepCopyObject(), c.manager)
			sameUpdate(t, "the second write", live2, want, got)
			if !fast.UpdateAnswersFast(c.gvk, live2, next2) {
				t.Error("the second update took the library's validation or compared the live managedFields")
			}
		})
	}
}

// sameUpdate fails unless got is want: the same object, the same managedFields
// entries, each with its time kept from live where want's is and renewed where
// want's is. The entries are compared as a set: both lists come out of the library's
// own sort, by operation, time in seconds and manager, and two runs of one update
// renew times in different seconds now and then.
func sameUpdate(t *testing.T, what string, live, want, got k8sruntime.Object) {
	t.Helper()
	if w, g := withoutManagedFields(t, want), withoutManagedFields(t, got); !bytes.Equal(w, g) {
		t.Fatalf("%s: the object differs from the library's:\nlibrary: %s\nfast:    %s", what, w, g)
	}
	liveTimes := map[string]*metav1.Time{}
	for _, e := range live.(metav1.Object).GetManagedFields() {
		liveTimes[entryKey(e)] = e.Time
	}
	describe := func(obj k8sruntime.Object) []string {
		var out []string
		for _, e := range obj.(metav1.Object).GetManagedFields() {
			kept := "renewed"
			if lt, ok := liveTimes[entryKey(e)]; ok && (lt == nil && e.Time == nil || lt != nil && e.Time != nil && lt.Equal(e.Time)) {
				kept = "kept"
			}
			out = append(out, fmt.Sprintf("%s time %s fields %s", entryKey(e), kept, e.FieldsV1.GetRawBytes()))
		}
		sortStrings(out)
		return out
	}
	w, g := describe(want), describe(got)
	if fmt.Sprint(w) != fmt.Sprint(g) {
		t.Fatalf("%s: managedFields differ from the library's:\nlibrary: %q\nfast:    %q", what, w, g)
	}
}

func entryKey(e metav1.ManagedFieldsEntry) string {
	return fmt.Sprintf("%s/%s/%s/%s", e.Operation, e.Manager, e.APIVersion, e.Subresource)
}

// withoutManagedFields is obj as JSON without its managedFields.
func withoutManagedFields(t *testing.T, obj k8sruntime.Object) []byte {
	obj = obj.DeepCopyObject()
	obj.(metav1.Object).SetManagedFields(nil)
	return untimed(t, obj)
}
