package ingress

import (
	"io"
	"net/http"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkProxy measures a request through the proxy to an httptest backend, client,
// proxy and backend in this one process (for profiles; bench/ingress has the figures).
func BenchmarkProxy(b *testing.B) {
	h := start(b, defaultClass(), service("s", true, echo(b, "s")),
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{rule("h.test", path("/", byNumber("s", 80)))}}})
	h.waitBackend("http", "h.test", "/", "s")
	url := "http://" + h.srv.HTTPAddr().String() + "/x"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			req.Host = "h.test"
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
