package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// Resolver turns a Service into the address of one of its ready endpoints.
type Resolver interface {
	ResolveService(ctx context.Context, namespace, name string, port int32) (string, error)
}

// clients keeps one HTTP client per CA bundle, so connections to a webhook are reused.
type clients struct {
	resolver Resolver
	mu       sync.Mutex
	byCA     map[[32]byte]*http.Client
}

func newClients(r Resolver) *clients {
	return &clients{resolver: r, byCA: map[[32]byte]*http.Client{}}
}

// svcSuffix marks the hosts of service references: name.namespace.svc.
const svcSuffix = ".svc"

func (c *clients) client(caBundle []byte) (*http.Client, error) {
	key := sha256.Sum256(caBundle)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.byCA[key]; cl != nil {
		return cl, nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, fmt.Errorf("invalid caBundle: no PEM certificates")
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// A service reference's host (name.namespace.svc) is dialled at one of its
		// ready endpoints; the TLS server name stays the service's DNS name.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err == nil && strings.HasSuffix(host, svcSuffix) && c.resolver != nil {
				parts := strings.Split(strings.TrimSuffix(host, svcSuffix), ".")
				p, _ := strconv.Atoi(port)
				if len(parts) == 2 {
					target, err := c.resolver.ResolveService(ctx, parts[1], parts[0], int32(p))
					if err != nil {
						return nil, err
					}
					addr = target
				}
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	cl := &http.Client{Transport: transport}
	c.byCA[key] = cl
	return cl, nil
}

// hookURL is where a webhook is reached.
func hookURL(cc admissionregistrationv1.WebhookClientConfig) (string, error) {
	if cc.URL != nil {
		return *cc.URL, nil
	}
	if cc.Service == nil {
		return "", fmt.Errorf("webhook has neither url nor service")
	}
	port := int32(443)
	if cc.Service.Port != nil {
		port = *cc.Service.Port
	}
	u := url.URL{Scheme: "https", Host: net.JoinHostPort(cc.Service.Name+"."+cc.Service.Namespace+svcSuffix, strconv.Itoa(int(port)))}
	if cc.Service.Path != nil {
		u.Path = *cc.Service.Path
	}
	return u.String(), nil
}

// call posts the review and returns the webhook's response.
func (c *clients) call(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, timeout time.Duration, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionResponse, error) {
	cl, err := c.client(cc.CABundle)
	if err != nil {
		return nil, err
	}
	u, err := hookURL(cc)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The webhook learns its deadline as upstream's client tells it: ?timeout=<duration>.
	u += "?timeout=" + url.QueryEscape(timeout.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to call webhook: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 3*1024*1024))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("the server responded with %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("received invalid webhook response: %v", err)
	}
	if out.Response == nil {
		return nil, fmt.Errorf("webhook response was absent")
	}
	if out.Kind != "AdmissionReview" || out.APIVersion != admissionv1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s", out.APIVersion, out.Kind)
	}
	if out.Response.UID != review.Request.UID {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", review.Request.UID, out.Response.UID)
	}
	return out.Response, nil
}
