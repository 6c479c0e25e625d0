package deployment

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/controller/util"
)

func TestTemplatesEqualIgnoresOnlyTheHashLabel(t *testing.T) {
	tmpl := func(labels map[string]string, image string) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"x": "y"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}
	}
	hash := util.DefaultHashLabelKey
	for _, tc := range []struct {
		name string
		a, b *corev1.PodTemplateSpec
		want bool
	}{
		{"same", tmpl(map[string]string{"app": "a"}, "i"), tmpl(map[string]string{"app": "a"}, "i"), true},
		{"hash on one side", tmpl(map[string]string{"app": "a", hash: "h"}, "i"), tmpl(map[string]string{"app": "a"}, "i"), true},
		{"hash on the other", tmpl(map[string]string{"app": "a"}, "i"), tmpl(map[string]string{"app": "a", hash: "h"}, "i"), true},
		{"different hashes", tmpl(map[string]string{"app": "a", hash: "h1"}, "i"), tmpl(map[string]string{"app": "a", hash: "h2"}, "i"), true},
		{"only a hash against none", tmpl(map[string]string{hash: "h"}, "i"), tmpl(nil, "i"), true},
		{"empty against nil", tmpl(map[string]string{}, "i"), tmpl(nil, "i"), true},
		{"label value differs", tmpl(map[string]string{"app": "a"}, "i"), tmpl(map[string]string{"app": "b"}, "i"), false},
		{"extra label", tmpl(map[string]string{"app": "a"}, "i"), tmpl(map[string]string{"app": "a", "tier": "t"}, "i"), false},
		{"extra label with a hash", tmpl(map[string]string{"app": "a", hash: "h"}, "i"), tmpl(map[string]string{"app": "a", "tier": "t"}, "i"), false},
		{"missing label", tmpl(map[string]string{"app": "a", "tier": "t"}, "i"), tmpl(map[string]string{"app": "a", hash: "h"}, "i"), false},
		{"image differs", tmpl(map[string]string{"app": "a"}, "i"), tmpl(map[string]string{"app": "a"}, "j"), false},
	} {
		a0, b0 := tc.a.DeepCopy(), tc.b.DeepCopy()
		if got := templatesEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: templatesEqual = %v, want %v", tc.name, got, tc.want)
		}
		if got := templatesEqual(tc.b, tc.a); got != tc.want {
			t.Errorf("%s, swapped: templatesEqual = %v, want %v", tc.name, got, tc.want)
		}
		if len(tc.a.Labels) != len(a0.Labels) || len(tc.b.Labels) != len(b0.Labels) {
			t.Errorf("%s: the templates' labels were modified", tc.name)
		}
		b := tc.b.DeepCopy()
		b.Annotations = map[string]string{"x": "z"}
		if tc.want && templatesEqual(tc.a, b) {
			t.Errorf("%s: templates with different annotations compare equal", tc.name)
		}
	}
}
