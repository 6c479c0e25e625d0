package bootstraptoken

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/jointoken"
)

func secret(mutate func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
		Type:       corev1.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			"token-id": []byte("abcdef"), "token-secret": []byte("0123456789abcdef"),
			"usage-bootstrap-authentication": []byte("true"),
			"expiration":                     []byte("2030-01-01T00:00:00Z"),
			"auth-extra-groups":              []byte("system:bootstrappers:mizzen:agent"),
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func TestAuthenticate(t *testing.T) {
	now := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		token  string
		secret *corev1.Secret
		user   string
		groups []string
	}{
		{name: "valid", token: "abcdef.0123456789abcdef", secret: secret(nil), user: "system:bootstrap:abcdef",
			groups: []string{"system:bootstrappers", "system:bootstrappers:mizzen:agent", "system:authenticated"}},
		{name: "no expiry", token: "abcdef.0123456789abcdef", secret: secret(func(s *corev1.Secret) { delete(s.Data, "expiration") }),
			user: "system:bootstrap:abcdef", groups: []string{"system:bootstrappers", "system:bootstrappers:mizzen:agent", "system:authenticated"}},
		{name: "wrong secret", token: "abcdef.0123456789abcdee", secret: secret(nil)},
		{name: "unknown id", token: "zzzzzz.0123456789abcdef", secret: secret(nil)},
		{name: "expired", token: "abcdef.0123456789abcdef", secret: secret(func(s *corev1.Secret) { s.Data["expiration"] = []byte("2028-12-31T23:59:59Z") })},
		{name: "not for authentication", token: "abcdef.0123456789abcdef", secret: secret(func(s *corev1.Secret) { delete(s.Data, "usage-bootstrap-authentication") })},
		{name: "usage false", token: "abcdef.0123456789abcdef", secret: secret(func(s *corev1.Secret) { s.Data["usage-bootstrap-authentication"] = []byte("false") })},
		{name: "wrong type", token: "abcdef.0123456789abcdef", secret: secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque })},
		{name: "being deleted", token: "abcdef.0123456789abcdef", secret: secret(func(s *corev1.Secret) { s.DeletionTimestamp = &metav1.Time{Time: now} })},
		{name: "bad extra group", token: "abcdef.0123456789abcdef", secret: secret(func(s *corev1.Secret) { s.Data["auth-extra-groups"] = []byte("system:masters") })},
		{name: "not a bootstrap token", token: "eyJhbGciOi.x.y", secret: secret(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := New(func(_ context.Context, ns, name string) (*corev1.Secret, error) {
				if ns == tc.secret.Namespace && name == tc.secret.Name {
					return tc.secret, nil
				}
				return nil, errors.New("not found")
			}).WithClock(func() time.Time { return now })
			u, err := a.Authenticate(context.Background(), tc.token)
			if tc.user == "" {
				if err == nil || !errors.Is(err, ErrInvalid) {
					t.Fatalf("got %v, %v; want refused", u, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Name != tc.user || !slices.Equal(u.Groups, tc.groups) {
				t.Errorf("got %s %v, want %s %v", u.Name, u.Groups, tc.user, tc.groups)
			}
		})
	}
}

func TestHandles(t *testing.T) {
	tok, err := jointoken.Parse("K10" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if !Handles(tok.Bearer()) || Handles(tok.String()) || Handles("eyJ.a.b") {
		t.Error("Handles misjudges a token's shape")
	}
}
