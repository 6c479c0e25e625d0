package core

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestSecretDefaults(t *testing.T) {
	s := &corev1.Secret{Data: map[string][]byte{"a": []byte("1")}, StringData: map[string]string{"b": "2", "a": "override"}}
	secretsResource().Strategy.Default(s)
	want := map[string][]byte{"a": []byte("override"), "b": []byte("2")}
	if s.Type != corev1.SecretTypeOpaque || s.StringData != nil || !equality.Semantic.DeepEqual(s.Data, want) {
		t.Errorf("secret = type %q data %q stringData %v; want Opaque with stringData merged into data", s.Type, s.Data, s.StringData)
	}
}

func TestSecretValidate(t *testing.T) {
	tests := []struct {
		name   string
		secret corev1.Secret
		want   []string
	}{
		{"opaque", corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("x")}}, nil},
		{"tls without key", corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("x")}},
			[]string{"data[tls.key]: Required value"}},
		{"tls empty", corev1.Secret{Type: corev1.SecretTypeTLS},
			[]string{"data[tls.crt]: Required value", "data[tls.key]: Required value"}},
		{"docker config json missing", corev1.Secret{Type: corev1.SecretTypeDockerConfigJson},
			[]string{"data[.dockerconfigjson]: Required value"}},
		{"docker config json not json", corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{")}},
			[]string{`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": unexpected end of JSON input`}},
		{"docker config json", corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}}, nil},
		{"service account token without account", corev1.Secret{Type: corev1.SecretTypeServiceAccountToken},
			[]string{"metadata.annotations[kubernetes.io/service-account.name]: Required value"}},
		{"basic auth", corev1.Secret{Type: corev1.SecretTypeBasicAuth},
			[]string{"data[username]: Required value", "data[password]: Required value"}},
		{"bad key", corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a b": nil}},
			[]string{`data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.secret.Name = "s"
			assertErrors(t, secretsResource().Strategy.Validate(context.Background(), &tc.secret), tc.want)
		})
	}
}

func TestSecretUpdate(t *testing.T) {
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v")}, Immutable: ptrTo(true)}
	changedType := old.DeepCopy()
	changedType.Type = "example.com/custom"
	assertErrors(t, secretsResource().Strategy.ValidateUpdate(context.Background(), changedType, old),
		[]string{`type: Invalid value: "example.com/custom": field is immutable`})
	changedData := old.DeepCopy()
	changedData.Data["k"] = []byte("w")
	assertErrors(t, secretsResource().Strategy.ValidateUpdate(context.Background(), changedData, old),
		[]string{"data: Forbidden: field is immutable when `immutable` is set"})
}

func TestSecretPrinterAndFields(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}}
	r := secretsResource()
	assertRow(t, r.Printer.Row(s), []interface{}{"tls", "kubernetes.io/tls", int64(2), "<unknown>"})
	if got := r.Fields(s); !equality.Semantic.DeepEqual(got, fields.Set{"type": "kubernetes.io/tls"}) {
		t.Errorf("fields = %v", got)
	}
}
