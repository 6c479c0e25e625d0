package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ServiceHealth is what a load balancer's health check of one node learns about a
// service with externalTrafficPolicy Local: how many of its endpoints run here.
type ServiceHealth struct {
	Namespace, Name string
	LocalEndpoints  int
}

// HealthCheckServices maps the healthCheckNodePort of every LoadBalancer service with
// externalTrafficPolicy Local to its ready endpoints on this node, which load balancers
// ask about to send traffic only to nodes that have some.
func HealthCheckServices(in Input) map[uint16]ServiceHealth {
	slices := slicesByService(in.EndpointSlices)
	out := map[uint16]ServiceHealth{}
	for _, svc := range in.Services {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal ||
			svc.Spec.HealthCheckNodePort <= 0 || svc.Spec.HealthCheckNodePort > 65535 {
			continue
		}
		local := map[string]bool{}
		for _, s := range slices[svc.Namespace+"/"+svc.Name] {
			for _, ep := range s.Endpoints {
				ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
				if ready && len(ep.Addresses) > 0 && ep.NodeName != nil && *ep.NodeName == in.NodeName {
					local[ep.Addresses[0]] = true
				}
			}
		}
		out[uint16(svc.Spec.HealthCheckNodePort)] = ServiceHealth{Namespace: svc.Namespace, Name: svc.Name, LocalEndpoints: len(local)}
	}
	return out
}

// serviceHealthServers keeps one HTTP server per healthCheckNodePort, answering 200
// while the service has local endpoints and 503 otherwise, as upstream's proxy does.
type serviceHealthServers struct {
	host  string // the address to bind; empty binds every address
	proxy *health
	log   *slog.Logger

	mu      sync.Mutex
	current map[uint16]ServiceHealth
	servers map[uint16]*http.Server
}

func newServiceHealthServers(host string, proxy *health, log *slog.Logger) *serviceHealthServers {
	return &serviceHealthServers{host: host, proxy: proxy, log: log, servers: map[uint16]*http.Server{}}
}

// update starts servers for new ports, stops those of ports gone, and makes every
// server answer from want. A port it cannot bind is logged and tried again next time.
func (s *serviceHealthServers) update(want map[uint16]ServiceHealth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = want
	for port, srv := range s.servers {
		if _, ok := want[port]; !ok {
			_ = srv.Close()
			delete(s.servers, port)
		}
	}
	for port := range want {
		if s.servers[port] != nil {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(int(port))))
		if err != nil {
			s.log.Error("serving a service's health check port", "port", port, "err", err)
			continue
		}
		srv := &http.Server{Handler: s.handler(port), ReadHeaderTimeout: 10 * time.Second}
		s.servers[port] = srv
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("serving a service's health check port", "port", port, "err", err)
			}
		}()
	}
}

// stop closes every server.
func (s *serviceHealthServers) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for port, srv := range s.servers {
		_ = srv.Close()
		delete(s.servers, port)
	}
}

// serviceHealthBody is upstream's answer.
type serviceHealthBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (s *serviceHealthServers) handler(port uint16) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		info, ok := s.current[port]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, nil)
			return
		}
		var body serviceHealthBody
		body.Service.Namespace, body.Service.Name = info.Namespace, info.Name
		body.LocalEndpoints, body.ServiceProxyHealthy = info.LocalEndpoints, s.proxy.healthy()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if info.LocalEndpoints == 0 || !body.ServiceProxyHealthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
}

// closeOn closes the servers when ctx ends.
func (s *serviceHealthServers) closeOn(ctx context.Context) {
	<-ctx.Done()
	s.stop()
}
