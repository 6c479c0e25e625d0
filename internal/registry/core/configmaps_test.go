package core

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConfigMapValidate(t *testing.T) {
	tests := []struct {
		name string
		cm   corev1.ConfigMap
		want []string
	}{
		{"valid", corev1.ConfigMap{Data: map[string]string{"app.properties": "a=b"}, BinaryData: map[string][]byte{"logo.png": {1}}}, nil},
		{"bad key", corev1.ConfigMap{Data: map[string]string{"a/b": "x"}},
			[]string{`data[a/b]: Invalid value: "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`}},
		{"key in both", corev1.ConfigMap{Data: map[string]string{"k": "x"}, BinaryData: map[string][]byte{"k": {1}}},
			[]string{`data[k]: Invalid value: "k": duplicate of key present in binaryData`}},
		{"too big", corev1.ConfigMap{Data: map[string]string{"a": strings.Repeat("x", 1<<20), "b": "y"}},
			[]string{`[]: Too long: may not be more than 1048576 bytes`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cm.Name = "cfg"
			assertErrors(t, configMapsResource().Strategy.Validate(context.Background(), &tc.cm), tc.want)
		})
	}
}

func TestConfigMapImmutable(t *testing.T) {
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"k": "v"}, Immutable: ptrTo(true)}
	tests := []struct {
		name   string
		mutate func(*corev1.ConfigMap)
		want   []string
	}{
		{"labels may change", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"a": "b"} }, nil},
		{"data may not", func(cm *corev1.ConfigMap) { cm.Data["k"] = "w" },
			[]string{"data: Forbidden: field is immutable when `immutable` is set"}},
		{"immutable may not be unset", func(cm *corev1.ConfigMap) { cm.Immutable = nil },
			[]string{"immutable: Forbidden: field is immutable when `immutable` is set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cm := old.DeepCopy()
			tc.mutate(cm)
			assertErrors(t, configMapsResource().Strategy.ValidateUpdate(context.Background(), cm, old), tc.want)
		})
	}
	mutable := old.DeepCopy()
	mutable.Immutable = nil
	changed := mutable.DeepCopy()
	changed.Data["k"] = "w"
	assertErrors(t, configMapsResource().Strategy.ValidateUpdate(context.Background(), changed, mutable), nil)
}

func TestConfigMapPrinter(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": nil}}
	assertRow(t, configMapsResource().Printer.Row(cm), []interface{}{"cfg", int64(3), "<unknown>"})
}
