package customresources

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"mizzen/internal/controller/namespace"
	"mizzen/internal/controller/resourcequota"
)

// TestNamespacesAndQuota: custom resources count in count/<plural>.<group> quotas and
// go with their namespace, through the real namespace and quota controllers.
func TestNamespacesAndQuota(t *testing.T) {
	dyn, cfg, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := kubernetes.NewForConfigOrDie(cfg)
	md := metadata.NewForConfigOrDie(cfg)
	disc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactory(client, 0)
	nsc := namespace.New(client, md, disc, factory.Core().V1().Namespaces())
	rq := resourcequota.New(client, md, disc, resourcequota.Informers{
		Quotas: factory.Core().V1().ResourceQuotas(), Pods: factory.Core().V1().Pods(), Services: factory.Core().V1().Services(),
		ConfigMaps: factory.Core().V1().ConfigMaps(), Secrets: factory.Core().V1().Secrets(), PVCs: factory.Core().V1().PersistentVolumeClaims(),
	})
	factory.Start(ctx.Done())
	go nsc.Run(ctx, 1)
	go rq.Run(ctx, 1)

	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	certs := dyn.Resource(certGVR).Namespace("team")
	for _, name := range []string{"a", "b"} {
		if _, err := certs.Create(ctx, cert(name, validSpec()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{"count/certificates.certs.example.com": resource.MustParse("5")}}}
	if _, err := client.CoreV1().ResourceQuotas("team").Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the quota counts the custom resources", func() string {
		q, err := client.CoreV1().ResourceQuotas("team").Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		used := q.Status.Used["count/certificates.certs.example.com"]
		if used.Value() != 2 {
			return "used " + used.String()
		}
		return ""
	})

	if err := client.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := client.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			l, _ := certs.List(ctx, metav1.ListOptions{})
			t.Fatalf("namespace not deleted: %v; certificates left: %d", err, len(l.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
