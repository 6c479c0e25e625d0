// Package server is the kubelet's node server: the HTTPS endpoint (port 10250 upstream)
// through which the apiserver reads container logs, runs exec, attach and port-forward
// sessions, lists the node's pods and reads resource usage. Callers authenticate as
// upstream's kubelet in webhook mode: by a client certificate of the client CA, or a
// bearer token the apiserver accepts in a TokenReview (no credentials: 401); each
// request is then authorized by a SubjectAccessReview on the node's nodes/<subresource>
// (internal/delegatedauth). Streams are handed to the container runtime's CRI
// streaming server.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cri "k8s.io/cri-api/pkg/apis"

	"mizzen/internal/delegatedauth"
)

// APIServerClientUser is the user name of the apiserver's client certificate for
// kubelets, as kubeadm names it; RBAC binds it system:kubelet-api-admin.
const APIServerClientUser = "kube-apiserver-kubelet-client"

// MetricsServerUser is the user name of the metrics server's client certificate;
// RBAC's system:metrics-server role lets it read nodes/stats and nodes/metrics.
const MetricsServerUser = "system:metrics-server"

// Upstream kubelet's webhook cache defaults: authentication.webhook.cacheTTL and
// authorization.webhook.cacheAuthorizedTTL / cacheUnauthorizedTTL.
const (
	AuthenticationCacheTTL = 2 * time.Minute
	AuthorizedCacheTTL     = 5 * time.Minute
	UnauthorizedCacheTTL   = 30 * time.Second
)

// Options configure a node server. Runtime, Pods, Client, Certificate and ClientCAs
// are required.
type Options struct {
	// Address is host:port to listen on, e.g. ":10250".
	Address  string
	NodeName string
	Runtime  cri.RuntimeService
	// Pods returns the pods bound to this node, as the kubelet knows them.
	Pods func() []*v1.Pod
	// PodVolumes returns the volumes of a pod (by UID) that /stats/summary reports;
	// optional.
	PodVolumes func(uid string) []PodVolume
	// PodCgroup names a pod's cgroup as the kubelet gives it to the runtime (the
	// sandbox's cgroup parent): the id label of the pod's and its containers' series in
	// /metrics/cadvisor. Optional: without it those ids are empty.
	PodCgroup func(*v1.Pod) string
	// Certificate is the serving certificate; ClientCAs verify callers' certificates.
	Certificate tls.Certificate
	// GetCertificate, when set, replaces Certificate: a certificate that rotates.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	ClientCAs      *x509.CertPool
	// Client reaches the apiserver with the kubelet's credentials, for the
	// TokenReviews and SubjectAccessReviews that authenticate and authorize callers.
	Client kubernetes.Interface
	// RootDir is the kubelet's state directory; its filesystem is the node's fs in
	// /stats/summary.
	RootDir string
	Logger  *slog.Logger
}

// Server is a node server.
type Server struct {
	opts    Options
	log     *slog.Logger
	runtime cri.RuntimeService
	auth    *delegatedauth.Delegated
	mux     *http.ServeMux
	// cpu remembers the node's previous CPU sample, to report a usage rate.
	cpuMu   sync.Mutex
	lastCPU *cpuSample
	usage   usageCache
}

// New builds a node server; Run or ServeHTTP serve it.
func New(opts Options) (*Server, error) {
	if opts.Runtime == nil || opts.Pods == nil || opts.Client == nil {
		return nil, errors.New("node server: Runtime, Pods and Client are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClientCAs == nil {
		// A nil pool would make crypto/tls trust the system's roots for clients.
		opts.ClientCAs = x509.NewCertPool()
	}
	auth := &delegatedauth.Delegated{
		Tokens:           delegatedauth.NewTokenReviewer(opts.Client.AuthenticationV1().TokenReviews(), AuthenticationCacheTTL),
		Authorizer:       delegatedauth.NewAuthorizer(opts.Client.AuthorizationV1().SubjectAccessReviews()),
		Log:              opts.Logger,
		DisableAnonymous: true,
	}
	auth.Authorizer.AllowTTL, auth.Authorizer.DenyTTL = AuthorizedCacheTTL, UnauthorizedCacheTTL
	auth.SetCertAuthenticator(&delegatedauth.CertAuthenticator{ClientCAs: opts.ClientCAs})
	s := &Server{opts: opts, log: opts.Logger, runtime: opts.Runtime, auth: auth, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	s.mux.HandleFunc("GET /pods", s.servePods)
	s.mux.HandleFunc("GET /runningpods/", s.serveRunningPods)
	s.mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.serveContainerLogs)
	for _, m := range []string{"GET", "POST"} {
		s.mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.serveExec)
		s.mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.serveAttach)
		s.mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.servePortForward)
	}
	s.mux.HandleFunc("GET /stats/summary", s.serveSummary)
	s.mux.HandleFunc("GET /metrics/resource", s.serveResourceMetrics)
	s.mux.Handle("GET /metrics/cadvisor", s.cadvisorHandler())
	s.mux.Handle("GET /metrics", s.metricsHandler())
	return s, nil
}

// Run serves HTTPS on opts.Address until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	l, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("node server: %w", err)
	}
	return s.Serve(ctx, l)
}

// Serve serves HTTPS on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:   s,
		TLSConfig: s.TLSConfig(),
		// Streams and followed logs last as long as the user wants; only the headers
		// are bounded.
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	s.log.Info("node server listening", "address", l.Addr().String())
	if err := hs.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// TLSConfig is the listener's configuration: client certificates are verified when
// given, and the handler refuses requests without one. HTTP/1.1 only, since the
// streaming endpoints hijack their connection for an upgrade.
func (s *Server) TLSConfig() *tls.Config {
	cfg := &tls.Config{
		Certificates: []tls.Certificate{s.opts.Certificate},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    s.opts.ClientCAs,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
	if s.opts.GetCertificate != nil {
		cfg.Certificates, cfg.GetCertificate = nil, s.opts.GetCertificate
	}
	return cfg
}

// ServeHTTP authenticates and authorizes the caller, then routes the request.
// Refusals are plain text, as upstream's kubelet answers them: 401 "Unauthorized", 403
// naming the user, verb and every subresource asked.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, err := s.auth.Authenticate(r)
	if err != nil {
		s.log.DebugContext(r.Context(), "unable to authenticate the request", "path", r.URL.Path, "err", err)
		writeText(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	verb, subresources := requestAttributes(r)
	for _, sub := range subresources {
		decision, err := s.auth.Authorizer.AuthorizeResource(r.Context(), user, authorizationv1.ResourceAttributes{
			Verb: verb, Version: "v1", Resource: "nodes", Subresource: sub, Name: s.opts.NodeName,
		})
		if err != nil {
			s.log.ErrorContext(r.Context(), "authorization error", "user", user.Name, "verb", verb, "subresource", sub, "err", err)
			writeText(w, http.StatusInternalServerError,
				fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", user.Name, verb, sub))
			return
		}
		if decision.Allowed {
			s.mux.ServeHTTP(w, r)
			return
		}
	}
	s.log.DebugContext(r.Context(), "forbidden", "user", user.Name, "verb", verb, "subresources", subresources)
	writeText(w, http.StatusForbidden,
		fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)\n", user.Name, verb, subresources))
}

// requestAttributes names a request as upstream's kubelet authorizer does with its
// fine-grained subresources (KubeletFineGrainedAuthz, GA in 1.36): the verb from the
// method, and the nodes subresources to ask in turn. Only pods, healthz and configz fall
// back to proxy (they were proxy's before the fine-grained ones existed); stats, metrics,
// logs, checkpoint, statusz and flagz are their own subresource alone, so nodes/proxy
// does not grant them; every other path is proxy's.
func requestAttributes(r *http.Request) (verb string, subresources []string) {
	verb = "get"
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch first {
	case "pods", "allocatedPods", "runningpods":
		return verb, []string{"pods", "proxy"}
	case "healthz", "configz":
		return verb, []string{first, "proxy"}
	case "stats", "metrics", "checkpoint", "statusz":
		return verb, []string{first}
	case "logs":
		return verb, []string{"log"}
	case "flagz":
		return verb, []string{"configz"}
	}
	return verb, []string{"proxy"}
}

func (s *Server) servePods(w http.ResponseWriter, _ *http.Request) {
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	for _, p := range s.opts.Pods() {
		pod := p.DeepCopy()
		pod.TypeMeta = metav1.TypeMeta{}
		list.Items = append(list.Items, *pod)
	}
	writeJSON(w, http.StatusOK, list)
}

// serveRunningPods lists the pods the runtime runs, built from its sandboxes and
// containers, as upstream's /runningpods does.
func (s *Server) serveRunningPods(w http.ResponseWriter, r *http.Request) {
	list, err := s.runningPods(r.Context())
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text))
}

// writeStatus answers with err as a metav1.Status, as the apiserver would.
func writeStatus(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, &st)
}

// parseBool reads a boolean query parameter as upstream does ("1", "true", ...).
func parseBool(s string) bool {
	b, err := strconv.ParseBool(s)
	return err == nil && b
}
