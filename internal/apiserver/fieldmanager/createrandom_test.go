package fieldmanager_test

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"mizzen/internal/registry/catalog"
)

// TestCreateWalksMatchTheLibraryOnRandomObjects fills objects of every built-in kind
// with random content (a fixed seed, so a failure repeats) and checks that the fast
// path and each of its walks give the library's managedFields, and that the Go
// object's walk answers for most of them (it declines only on duplicate list items
// and the like, which random lists sometimes make: empty strings in a set, two ports
// defaulted alike).
func TestCreateWalksMatchTheLibraryOnRandomObjects(t *testing.T) {
	m := managersWithCRDs(t)
	const perKind = 8
	answered, all := 0, 0
	for i, r := range catalog.All() {
		gvk := r.GroupVersionKind()
		if _, ok := r.New().(*unstructured.Unstructured); ok {
			continue
		}
		t.Run(gvk.String(), func(t *testing.T) {
			f := randomFiller(int64(i))
			for n := 0; n < perKind; n++ {
				all++
				obj := newObject(t, gvk)
				f.Fill(obj)
				obj.GetObjectKind().SetGroupVersionKind(gvk)
				if r.Strategy != nil {
					r.Strategy.Default(obj)
				}
				bothPaths(t, m, gvk, obj, "random")
				if goWalkAnswers(t, m, gvk, obj) {
					answered++
				}
			}
		})
	}
	if answered*4 < all*3 {
		t.Errorf("the Go object's walk answered for %d of %d random objects, want three quarters at least", answered, all)
	}
	t.Logf("the Go object's walk answered for %d of %d random objects", answered, all)
}

// randomFiller fills API objects with random content the way a client could send it:
// valid quantities, times to the second, no managedFields (a create's fast path
// applies only without them), no embedded raw objects.
func randomFiller(seed int64) *randfill.Filler {
	return randfill.New().NilChance(0.3).NumElements(0, 3).MaxDepth(8).
		RandSource(rand.NewSource(seed)).
		Funcs(
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewQuantity(c.Int63n(1000), resource.DecimalSI)
			},
			func(tm *metav1.Time, c randfill.Continue) {
				*tm = metav1.Unix(c.Int63n(2e9), 0)
			},
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
			func(raw *k8sruntime.RawExtension, c randfill.Continue) {
				*raw = k8sruntime.RawExtension{}
			},
			func(meta *metav1.ObjectMeta, c randfill.Continue) {
				c.FillNoCustom(meta)
				meta.ManagedFields = nil
				meta.ResourceVersion, meta.UID = "", ""
			},
		)
}
