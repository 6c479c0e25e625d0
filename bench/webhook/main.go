// Command webhook measures the latency one validating admission webhook adds to a
// write: a real `mizzen server` process (embedded etcd and the apiserver only) takes
// sequential ConfigMap creates from one client, first without a webhook, then with a
// ValidatingWebhookConfiguration whose allow-all webhook is a TLS server on loopback
// in this process (url client config, caBundle verified). It prints p50 and p99 of
// each and their difference for BENCHMARKS.md.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go run ./bench/webhook
package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/bench/internal/benchutil"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary")
	n := flag.Int("creates", 2000, "ConfigMap creates per phase")
	flag.Parse()
	if err := run(*bin, *n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(bin string, n int) error {
	srv, err := benchutil.StartServer(bin, "--disable", "agent,scheduler,controller-manager,dns,metrics-server")
	if err != nil {
		return err
	}
	defer srv.Stop()
	c := srv.Client
	ctx := context.Background()
	hook, calls := allowAll()
	defer hook.Close()

	base, err := creates(ctx, c, "before", n)
	if err != nil {
		return err
	}
	if err := register(ctx, c, hook); err != nil {
		return err
	}
	with, err := creates(ctx, c, "with", n)
	if err != nil {
		return err
	}
	if got := calls.Load(); got < int64(n) {
		return fmt.Errorf("the webhook was called %d times for %d creates", got, n)
	}
	p := benchutil.Percentile
	b50, b99, w50, w99 := p(base, 0.5), p(base, 0.99), p(with, 0.5), p(with, 0.99)
	fmt.Printf("ConfigMap create, 1 client, %d each: without webhook p50 %v p99 %v; with one validating webhook p50 %v p99 %v; added p50 %v p99 %v\n",
		n, b50.Round(10*time.Microsecond), b99.Round(10*time.Microsecond), w50.Round(10*time.Microsecond), w99.Round(10*time.Microsecond),
		(w50 - b50).Round(10*time.Microsecond), (w99 - b99).Round(10*time.Microsecond))
	return nil
}

// allowAll is a loopback TLS webhook allowing everything; calls counts its reviews.
func allowAll() (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	return s, &calls
}

func register(ctx context.Context, c kubernetes.Interface, hook *httptest.Server) error {
	none := admissionregistrationv1.SideEffectClassNone
	url := hook.URL + "/validate"
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "allow.bench.mizzen",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The configuration takes effect once the watch cache has it.
	time.Sleep(time.Second)
	return nil
}

// creates makes n ConfigMaps one after the other (after 100 to warm up) and returns
// each create's latency.
func creates(ctx context.Context, c kubernetes.Interface, prefix string, n int) ([]time.Duration, error) {
	data := map[string]string{"key": strings.Repeat("x", 64)}
	out := make([]time.Duration, 0, n)
	for i := -100; i < n; i++ {
		start := time.Now()
		_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i+100)}, Data: data}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		if i >= 0 {
			out = append(out, time.Since(start))
		}
	}
	return out, nil
}
