package fieldmanager_test

import (
	"math/rand"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"mizzen/internal/registry/catalog"
)

// TestUpdateWithUnusualManagedFields updates live objects whose managedFields a
// client wrote in ways the library never does (an entry owning managedFields
// itself, field names spelt with escapes, a FieldsV1 that is not an object of
// objects, CBOR), where the update must not compare the live object without them,
// and checks that it gives the library's managedFields.
func TestUpdateWithUnusualManagedFields(t *testing.T) {
	fast, lib := newManagers(t), libraryManagers(t)
	for name, raw := range map[string]string{
		"owns managedFields":      `{"f:metadata":{"f:managedFields":{}},"f:spec":{"f:replicas":{}}}`,
		"escaped name":            `{"f:metadata":{"f:managed\u0046ields":{}},"f:spec":{"f:replicas":{}}}`,
		"escaped ordinary name":   `{"f:spec":{"f:r\u0065plicas":{}}}`,
		"number":                  `{"f:spec":{"f:replicas":1}}`,
		"list":                    `[{"f:spec":{}}]`,
		"trailing data":           `{"f:spec":{"f:replicas":{}}} {}`,
		"not JSON":                `{"f:spec":{"f:replicas":{}}`,
		"CBOR map":                "\xa1\x46f:spec\xa0",
		"empty":                   ``,
		"plain, with list keys":   `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{}}}}}}}`,
		"plain, owns status only": `{"f:status":{"f:replicas":{}}}`,
	} {
		for _, sub := range []string{"", "status"} {
			t.Run(name+"/"+sub, func(t *testing.T) {
				live := storedLive(fast, updateCases[4]) // a deployment
				entries := live.(metav1.Object).GetManagedFields()
				entries = append(entries, metav1.ManagedFieldsEntry{
					Manager: "client", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
					Time: &metav1.Time{}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)},
				})
				live.(metav1.Object).SetManagedFields(entries)
				next := live.DeepCopyObject().(*appsv1.Deployment)
				r := int32(7)
				next.Spec.Replicas = &r
				next.Status.Replicas = 7
				want := lib.Update(deploymentGVK, sub, live, next.DeepCopyObject(), "other")
				got := fast.Update(deploymentGVK, sub, live, next.DeepCopyObject(), "other")
				sameUpdate(t, "the update", live, want, got)
			})
		}
	}
}

// TestValidationMatchesTheLibraryOnRandomObjects checks the package's validation of
// Go objects against the library's over random objects of every built-in kind and
// random changes of them: it may decline, never call valid what the library rejects.
func TestValidationMatchesTheLibraryOnRandomObjects(t *testing.T) {
	m := newManagers(t)
	tc, err := m.TypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	lib := libraryManagers(t)
	libTC, err := lib.TypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	agreed, valid, all := 0, 0, 0
	for i, r := range catalog.All() {
		gvk := r.GroupVersionKind()
		if gvk.Group == "example.com" {
			continue
		}
		f := randomFiller(int64(1000 + i))
		rnd := rand.New(rand.NewSource(int64(i)))
		// 32 per kind: the invalid ones, from the dropped list item fields, were 8–14 of
		// 1,024 with 16 (map order varies the drops), too near the floor below.
		for n := 0; n < 32; n++ {
			obj := randomObject(t, r, f)
			if n%2 == 1 {
				// Half with list items missing fields, their keys among them.
				u, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
				if err != nil {
					t.Fatal(err)
				}
				dropItemFields(rnd, u, false)
				obj = newObject(t, gvk)
				if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
					continue
				}
			}
			// Teach the converter the kind.
			_, _ = tc.ObjectToTyped(newObject(t, gvk), typed.AllowDuplicates)
			all++
			_, libErr := libTC.ObjectToTyped(obj, typed.AllowDuplicates)
			fastValid := m.ValidGoObject(obj)
			if fastValid && libErr != nil {
				t.Fatalf("%v: the package's validation accepts what the library rejects: %v", gvk, libErr)
			}
			if libErr == nil {
				valid++
				if fastValid {
					agreed++
				}
			}
		}
	}
	t.Logf("of %d random objects the library found %d valid, the package's validation %d of them", all, valid, agreed)
	if all-valid < 10 {
		t.Errorf("the library found %d of %d random objects valid: too few invalid ones to test with", valid, all)
	}
	if agreed*4 < valid*3 {
		t.Errorf("the package's validation answered for %d of the %d valid objects, want three quarters at least", agreed, valid)
	}
}

// dropItemFields deletes fields of the maps that are list items under v, each with
// even odds.
func dropItemFields(rnd *rand.Rand, v interface{}, inList bool) {
	switch vv := v.(type) {
	case map[string]interface{}:
		for k, x := range vv {
			if inList && rnd.Intn(2) == 0 {
				delete(vv, k)
				continue
			}
			dropItemFields(rnd, x, false)
		}
	case []interface{}:
		for _, x := range vv {
			dropItemFields(rnd, x, true)
		}
	}
}
