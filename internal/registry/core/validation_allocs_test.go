package core

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// What every pod carries once admitted, its tolerations and its service account's
// projected volume, validates without building paths when valid: the paths of the
// errors are built only for errors. The same fields invalid still report them at
// their paths.
func TestValidPodFieldsEveryPodHasBuildNoPaths(t *testing.T) {
	tolerations := []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
	}
	sources := []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	}
	path := field.NewPath("spec")
	allocs := testing.AllocsPerRun(100, func() {
		if errs := validateTolerations(tolerations, path.Child("tolerations")); errs != nil {
			t.Fatal(errs)
		}
		if errs := validateProjectedSources(sources, path.Child("volumes").Index(0).Child("projected", "sources")); errs != nil {
			t.Fatal(errs)
		}
	})
	// The five paths the calls above build themselves. Building every field's path
	// first made it 29; apimachinery's label-name check, splitting each toleration's
	// key, 7.
	if allocs > 5 {
		t.Errorf("%v allocations to validate valid tolerations and projected sources, want at most 5", allocs)
	}

	tolerations[1].Key, tolerations[1].Effect = "bad key!", "Sometimes"
	sources[1].ConfigMap.Items[0].Path = "../ca.crt"
	sources[2].DownwardAPI.Items[0].Mode = ptr.To[int32](01000)
	var got []string
	for _, e := range validateTolerations(tolerations, path.Child("tolerations")) {
		got = append(got, e.Field)
	}
	for _, e := range validateProjectedSources(sources, path.Child("volumes").Index(0).Child("projected", "sources")) {
		got = append(got, e.Field)
	}
	want := []string{
		"spec.tolerations[1].key",
		"spec.tolerations[1].effect", // tolerationSeconds without NoExecute
		"spec.tolerations[1].effect", // not an effect
		"spec.volumes[0].projected.sources[1].configMap.items[0].path",
		"spec.volumes[0].projected.sources[2].downwardAPI.items[0].mode",
	}
	if len(got) != len(want) {
		t.Fatalf("errors at %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("error %d at %s, want %s", i, got[i], want[i])
		}
	}
}
