package tokencleaner

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/controller/util"
)

func token(name, ns string, typ corev1.SecretType, expiration string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "u-" + "name"}, Type: typ, Data: map[string][]byte{}}
	if expiration != "" {
		s.Data["expiration"] = []byte(expiration)
	}
	return s
}

func TestSync(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		secret    *corev1.Secret
		deleted   bool
		requeueIn time.Duration
	}{
		{"expired", token("bootstrap-token-aaaaaa", "kube-system", corev1.SecretTypeBootstrapToken, "2029-12-31T23:00:00Z"), true, 0},
		{"unreadable expiration", token("bootstrap-token-bbbbbb", "kube-system", corev1.SecretTypeBootstrapToken, "tomorrow"), true, 0},
		{"not yet", token("bootstrap-token-cccccc", "kube-system", corev1.SecretTypeBootstrapToken, "2030-01-01T01:00:00Z"), false, time.Hour},
		{"never expires", token("bootstrap-token-dddddd", "kube-system", corev1.SecretTypeBootstrapToken, ""), false, 0},
		{"other type", token("bootstrap-token-eeeeee", "kube-system", corev1.SecretTypeOpaque, "2029-12-31T23:00:00Z"), false, 0},
		{"other namespace", token("bootstrap-token-ffffff", "default", corev1.SecretTypeBootstrapToken, "2029-12-31T23:00:00Z"), false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.secret)
			f := informers.NewSharedInformerFactory(client, 0)
			c := New(client, f.Core().V1().Secrets())
			c.now = func() time.Time { return now }
			ctx := context.Background()
			f.Start(ctx.Done())
			f.WaitForCacheSync(ctx.Done())
			err := c.sync(ctx, tc.secret.Namespace+"/"+tc.secret.Name)
			var later *util.RequeueAfterError
			switch {
			case tc.requeueIn > 0:
				if !errorsAs(err, &later) || later.After != tc.requeueIn {
					t.Errorf("sync: %v, want a requeue in %s", err, tc.requeueIn)
				}
			case err != nil:
				t.Fatalf("sync: %v", err)
			}
			_, err = client.CoreV1().Secrets(tc.secret.Namespace).Get(ctx, tc.secret.Name, metav1.GetOptions{})
			if gone := apierrors.IsNotFound(err); gone != tc.deleted {
				t.Errorf("deleted = %v, want %v", gone, tc.deleted)
			}
		})
	}
}

func errorsAs(err error, target **util.RequeueAfterError) bool {
	e, ok := err.(*util.RequeueAfterError)
	if ok {
		*target = e
	}
	return ok
}
