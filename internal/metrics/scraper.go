package metrics

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	nodeserver "mizzen/internal/kubelet/server"
)

// SummarySource reads a node's /stats/summary.
type SummarySource interface {
	Summary(ctx context.Context, node *corev1.Node) (*nodeserver.Summary, error)
}

// NodeLister lists the nodes to scrape.
type NodeLister interface {
	List(selector labels.Selector) ([]*corev1.Node, error)
}

// Scraper reads every node's summary once per resolution and hands the results to a
// store.
type Scraper struct {
	Nodes  NodeLister
	Source SummarySource
	Store  *Store
	// Resolution is the interval between scrapes; each scrape's requests are bounded
	// by it.
	Resolution time.Duration
	Log        *slog.Logger
}

// Run scrapes at once and then every Resolution until ctx ends.
func (s *Scraper) Run(ctx context.Context) {
	t := time.NewTicker(s.Resolution)
	defer t.Stop()
	for {
		s.ScrapeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ScrapeOnce reads every node concurrently and stores what answered; a node that
// failed loses its metrics until it answers again.
func (s *Scraper) ScrapeOnce(ctx context.Context) {
	nodes, err := s.Nodes.List(labels.Everything())
	if err != nil {
		s.log().Error("listing nodes", "err", err)
		return
	}
	scrapeCtx, cancel := context.WithTimeout(ctx, s.Resolution)
	defer cancel()
	var (
		mu        sync.Mutex
		wg        sync.WaitGroup
		summaries = map[string]*nodeserver.Summary{}
	)
	for _, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum, err := s.Source.Summary(scrapeCtx, node)
			if err != nil {
				s.log().Warn("scraping a node", "node", node.Name, "err", err)
				return
			}
			mu.Lock()
			summaries[node.Name] = sum
			mu.Unlock()
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		// Stopping: our own cancellation says nothing about the nodes.
		return
	}
	s.Store.Update(summaries)
}

func (s *Scraper) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// KubeletClient reads summaries from kubelets' node servers over HTTPS, at a node's
// InternalIP (else its Hostname address) and advertised kubelet port, as the apiserver
// reaches them.
type KubeletClient struct {
	Client *http.Client
}

// NewKubeletClient returns a client that presents tlsConfig's certificate (one whose
// user kubelets let read stats: nodeserver.MetricsServerUser).
func NewKubeletClient(tlsConfig *tls.Config, timeout time.Duration) *KubeletClient {
	return &KubeletClient{Client: &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:     tlsConfig,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
		},
	}}
}

// defaultKubeletPort is used when a node does not advertise its kubelet endpoint.
const defaultKubeletPort = 10250

// Summary implements SummarySource.
func (k *KubeletClient) Summary(ctx context.Context, node *corev1.Node) (*nodeserver.Summary, error) {
	host := nodeAddress(node)
	if host == "" {
		return nil, fmt.Errorf("node %s has no InternalIP or Hostname address", node.Name)
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultKubeletPort
	}
	url := "https://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/stats/summary?only_cpu_and_memory=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	sum := &nodeserver.Summary{}
	if err := json.Unmarshal(body, sum); err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return sum, nil
}

func nodeAddress(node *corev1.Node) string {
	for _, want := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == want {
				return a.Address
			}
		}
	}
	return ""
}
