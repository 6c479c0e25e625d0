package kubelet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func service(ns, name, clusterIP string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: clusterIP, Ports: ports}}
}

// serviceLister is a lister over these Services, indexed by namespace as an informer's.
func serviceLister(t *testing.T, svcs ...*v1.Service) corelisters.ServiceLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range svcs {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewServiceLister(idx)
}

func TestServiceEnv(t *testing.T) {
	cases := []struct {
		name string
		svc  *v1.Service
		want string
	}{{
		name: "the kubernetes service",
		svc:  service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		want: "KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 KUBERNETES_SERVICE_PORT_HTTPS=443 " +
			"KUBERNETES_PORT=tcp://10.96.0.1:443 KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443 KUBERNETES_PORT_443_TCP_PROTO=tcp " +
			"KUBERNETES_PORT_443_TCP_PORT=443 KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1",
	}, {
		name: "dashes and several ports",
		svc: service("ns", "my-dns", "10.96.0.10",
			v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}, v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}),
		want: "MY_DNS_SERVICE_HOST=10.96.0.10 MY_DNS_SERVICE_PORT=53 MY_DNS_SERVICE_PORT_DNS=53 MY_DNS_SERVICE_PORT_DNS_TCP=53 " +
			"MY_DNS_PORT=udp://10.96.0.10:53 MY_DNS_PORT_53_UDP=udp://10.96.0.10:53 MY_DNS_PORT_53_UDP_PROTO=udp MY_DNS_PORT_53_UDP_PORT=53 " +
			"MY_DNS_PORT_53_UDP_ADDR=10.96.0.10 MY_DNS_PORT_53_TCP=tcp://10.96.0.10:53 MY_DNS_PORT_53_TCP_PROTO=tcp MY_DNS_PORT_53_TCP_PORT=53 " +
			"MY_DNS_PORT_53_TCP_ADDR=10.96.0.10",
	}, {
		name: "one unnamed port without a protocol is TCP",
		svc:  service("ns", "web", "10.96.0.20", v1.ServicePort{Port: 80}),
		want: "WEB_SERVICE_HOST=10.96.0.20 WEB_SERVICE_PORT=80 WEB_PORT=tcp://10.96.0.20:80 WEB_PORT_80_TCP=tcp://10.96.0.20:80 " +
			"WEB_PORT_80_TCP_PROTO=tcp WEB_PORT_80_TCP_PORT=80 WEB_PORT_80_TCP_ADDR=10.96.0.20",
	}, {
		name: "an unnamed first port and a named SCTP one",
		svc: service("ns", "sig-nal", "10.96.0.30",
			v1.ServicePort{Port: 8080, Protocol: v1.ProtocolTCP}, v1.ServicePort{Name: "sig-sctp", Port: 9999, Protocol: v1.ProtocolSCTP}),
		want: "SIG_NAL_SERVICE_HOST=10.96.0.30 SIG_NAL_SERVICE_PORT=8080 SIG_NAL_SERVICE_PORT_SIG_SCTP=9999 " +
			"SIG_NAL_PORT=tcp://10.96.0.30:8080 SIG_NAL_PORT_8080_TCP=tcp://10.96.0.30:8080 SIG_NAL_PORT_8080_TCP_PROTO=tcp " +
			"SIG_NAL_PORT_8080_TCP_PORT=8080 SIG_NAL_PORT_8080_TCP_ADDR=10.96.0.30 " +
			"SIG_NAL_PORT_9999_SCTP=sctp://10.96.0.30:9999 SIG_NAL_PORT_9999_SCTP_PROTO=sctp " +
			"SIG_NAL_PORT_9999_SCTP_PORT=9999 SIG_NAL_PORT_9999_SCTP_ADDR=10.96.0.30",
	}, {
		name: "an IPv6 cluster IP is bracketed in URLs",
		svc:  service("ns", "v6", "fd00::10", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP}),
		want: "V6_SERVICE_HOST=fd00::10 V6_SERVICE_PORT=80 V6_PORT=tcp://[fd00::10]:80 V6_PORT_80_TCP=tcp://[fd00::10]:80 " +
			"V6_PORT_80_TCP_PROTO=tcp V6_PORT_80_TCP_PORT=80 V6_PORT_80_TCP_ADDR=fd00::10",
	}, {
		name: "headless",
		svc:  service("ns", "db", v1.ClusterIPNone, v1.ServicePort{Port: 5432}),
	}, {
		name: "ExternalName",
		svc: &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "db.example.com", Ports: []v1.ServicePort{{Port: 5432}}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, kv := range serviceEnv(tc.svc) {
				got = append(got, kv[0]+"="+kv[1])
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("env:\n%s\nwant:\n%s", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestMakeEnvServiceLinks checks which Services a container sees and how its own
// variables combine with theirs.
func TestMakeEnvServiceLinks(t *testing.T) {
	lister := serviceLister(t,
		service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		service("default", "web", "10.96.0.20", v1.ServicePort{Port: 80, Protocol: v1.ProtocolTCP}),
		service("apps", "my-db", "10.96.1.5",
			v1.ServicePort{Name: "pg", Port: 5432, Protocol: v1.ProtocolTCP}, v1.ServicePort{Name: "metrics", Port: 9187, Protocol: v1.ProtocolTCP}),
		service("apps", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ext"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "db.example.com"}},
		service("other", "cache", "10.96.2.2", v1.ServicePort{Port: 6379, Protocol: v1.ProtocolTCP}),
		service("shadow", "kubernetes", "10.96.3.3", v1.ServicePort{Port: 8080, Protocol: v1.ProtocolTCP}),
	)
	client := k8sfake.NewSimpleClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "cfg"},
		Data: map[string]string{"MY_DB_SERVICE_HOST": "db.local", "LEVEL": "debug"}})

	cases := []struct {
		name    string
		ns      string
		links   *bool
		env     []v1.EnvVar
		envFrom []v1.EnvFromSource
		// prefixes are the only variable name prefixes expected, and want some of the
		// values.
		prefixes []string
		want     map[string]string
		// first is the variable expected first, when set.
		first string
	}{{
		name:     "links unset: the namespace's services with a cluster IP and the master service",
		ns:       "apps",
		prefixes: []string{"KUBERNETES_", "MY_DB_"},
		want: map[string]string{
			"KUBERNETES_SERVICE_HOST": "10.96.0.1", "MY_DB_SERVICE_HOST": "10.96.1.5", "MY_DB_SERVICE_PORT": "5432",
			"MY_DB_SERVICE_PORT_PG": "5432", "MY_DB_SERVICE_PORT_METRICS": "9187", "MY_DB_PORT": "tcp://10.96.1.5:5432",
			"MY_DB_PORT_9187_TCP_ADDR": "10.96.1.5",
		},
	}, {
		name:     "links false: only the master service",
		ns:       "apps",
		links:    ptr.To(false),
		prefixes: []string{"KUBERNETES_"},
		want:     map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
	}, {
		name:     "links true in default: the master service once, with its neighbours",
		ns:       "default",
		links:    ptr.To(true),
		prefixes: []string{"KUBERNETES_", "WEB_"},
		want:     map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "WEB_SERVICE_HOST": "10.96.0.20", "WEB_PORT": "tcp://10.96.0.20:80"},
	}, {
		name:     "links false in default",
		ns:       "default",
		links:    ptr.To(false),
		prefixes: []string{"KUBERNETES_"},
		want:     map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
	}, {
		name:     "a namespace's own kubernetes service wins over default's",
		ns:       "shadow",
		prefixes: []string{"KUBERNETES_"},
		want:     map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.3.3", "KUBERNETES_SERVICE_PORT": "8080"},
	}, {
		name:     "links false ignores the namespace's own kubernetes service",
		ns:       "shadow",
		links:    ptr.To(false),
		prefixes: []string{"KUBERNETES_"},
		want:     map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
	}, {
		name: "the container's env overrides a service variable and comes first",
		ns:   "apps",
		env: []v1.EnvVar{
			{Name: "KUBERNETES_SERVICE_PORT", Value: "8443"},
			{Name: "MY_DB_SERVICE_PORT_PG", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		prefixes: []string{"KUBERNETES_", "MY_DB_"},
		want:     map[string]string{"KUBERNETES_SERVICE_PORT": "8443", "MY_DB_SERVICE_PORT_PG": "p", "KUBERNETES_SERVICE_HOST": "10.96.0.1"},
		first:    "KUBERNETES_SERVICE_PORT",
	}, {
		name: "envFrom overrides a service variable",
		ns:   "apps",
		envFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		prefixes: []string{"KUBERNETES_", "MY_DB_", "LEVEL"},
		want:     map[string]string{"MY_DB_SERVICE_HOST": "db.local", "LEVEL": "debug", "MY_DB_SERVICE_PORT": "5432"},
		first:    "LEVEL",
	}, {
		name: "$(VAR) expands service variables and the container's own overrides",
		ns:   "apps",
		env: []v1.EnvVar{
			{Name: "DB_URL", Value: "postgres://$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT_PG)/app"},
			{Name: "KUBERNETES_SERVICE_PORT", Value: "8443"},
			{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
			{Name: "CACHE", Value: "$(CACHE_SERVICE_HOST)"},
		},
		prefixes: []string{"KUBERNETES_", "MY_DB_", "DB_URL", "API", "CACHE"},
		want: map[string]string{
			"DB_URL": "postgres://10.96.1.5:5432/app", "API": "https://10.96.0.1:8443",
			"CACHE": "$(CACHE_SERVICE_HOST)", // another namespace's service is not visible
		},
		first: "DB_URL",
	}, {
		name:     "$(VAR) of a service hidden by links false stays as written",
		ns:       "apps",
		links:    ptr.To(false),
		env:      []v1.EnvVar{{Name: "DB", Value: "$(MY_DB_SERVICE_HOST)"}, {Name: "API", Value: "$(KUBERNETES_PORT)"}},
		prefixes: []string{"KUBERNETES_", "DB", "API"},
		want:     map[string]string{"DB": "$(MY_DB_SERVICE_HOST)", "API": "tcp://10.96.0.1:443"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kl := &Kubelet{client: client, services: lister, servicesSynced: func() bool { return true },
				opts: Options{Machine: &MachineInfo{}}}
			kl.volumeSources = volumeSources{kl: kl}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: tc.ns},
				Spec: v1.PodSpec{EnableServiceLinks: tc.links}}
			c := &v1.Container{Name: "c", Env: tc.env, EnvFrom: tc.envFrom}
			env, err := kl.makeEnv(context.Background(), pod, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, kv := range env {
				if _, dup := got[kv.Key]; dup {
					t.Errorf("%s appears twice", kv.Key)
				}
				got[kv.Key] = string(kv.Value)
				if !hasAnyPrefix(kv.Key, tc.prefixes) {
					t.Errorf("unexpected variable %s=%s", kv.Key, kv.Value)
				}
			}
			for _, p := range tc.prefixes {
				if !hasKeyWithPrefix(got, p) {
					t.Errorf("no variable starting with %s", p)
				}
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if tc.first != "" && (len(env) == 0 || env[0].Key != tc.first) {
				t.Errorf("first variable is not %s: %v", tc.first, env)
			}
		})
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func hasKeyWithPrefix(m map[string]string, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// TestMakeEnvWaitsForServices: a pod from the API waits for the first list of
// Services and fails without it; a static pod does not wait.
func TestMakeEnvWaitsForServices(t *testing.T) {
	lister := serviceLister(t, service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443}))
	apiPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	staticPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "kube-system",
		Annotations: map[string]string{annoConfigSource: "file"}}}
	c := &v1.Container{Name: "c"}

	cases := []struct {
		name string
		pod  *v1.Pod
		// syncAfter is how many polls of HasSynced report false first; -1 is never.
		syncAfter int32
		wantErr   error
		wantHost  string
	}{
		{name: "synced", pod: apiPod, syncAfter: 0, wantHost: "10.96.0.1"},
		{name: "synced while waiting", pod: apiPod, syncAfter: 3, wantHost: "10.96.0.1"},
		{name: "never synced", pod: apiPod, syncAfter: -1, wantErr: errServicesNotSynced},
		{name: "a static pod does not wait", pod: staticPod, syncAfter: -1, wantHost: "10.96.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var polls atomic.Int32
			synced := func() bool {
				n := polls.Add(1)
				return tc.syncAfter >= 0 && n > tc.syncAfter
			}
			kl := &Kubelet{services: lister, servicesSynced: synced, opts: Options{Machine: &MachineInfo{}}}
			// The context ends the wait for the never-synced case long before
			// serviceSyncTimeout; the others return as soon as the informer reports.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			env, err := kl.makeEnv(ctx, tc.pod, c, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			host := ""
			for _, kv := range env {
				if kv.Key == "KUBERNETES_SERVICE_HOST" {
					host = string(kv.Value)
				}
			}
			if host != tc.wantHost {
				t.Errorf("KUBERNETES_SERVICE_HOST = %q, want %q", host, tc.wantHost)
			}
		})
	}
}

// recordingRuntime keeps the config of every container created through it, and the
// timeout of every stop.
type recordingRuntime struct {
	cri.RuntimeService
	mu       sync.Mutex
	configs  map[string]*runtimeapi.ContainerConfig // by container name
	timeouts []int64                                // of StopContainer calls, in order
}

func (r *recordingRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.mu.Lock()
	r.timeouts = append(r.timeouts, timeout)
	r.mu.Unlock()
	return r.RuntimeService.StopContainer(ctx, id, timeout)
}

func (r *recordingRuntime) stopTimeouts() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.timeouts)
}

func (r *recordingRuntime) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.configs[cfg.GetMetadata().GetName()] = cfg
	r.mu.Unlock()
	return r.RuntimeService.CreateContainer(ctx, sandboxID, cfg, sbCfg)
}

func (r *recordingRuntime) config(name string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.configs[name]
}

// TestContainerGetsServiceLinks runs a kubelet whose namespace has Services before the
// pod exists and checks the environment its container was created with.
func TestContainerGetsServiceLinks(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, svc := range []*v1.Service{
		service("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		service("default", "web-api", "10.96.0.40", v1.ServicePort{Name: "http", Port: 8080, Protocol: v1.ProtocolTCP}),
		service("default", "peers", v1.ClusterIPNone, v1.ServicePort{Port: 7000}),
		service("elsewhere", "cache", "10.96.9.9", v1.ServicePort{Port: 6379, Protocol: v1.ProtocolTCP}),
	} {
		if _, err := h.client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rt := &recordingRuntime{RuntimeService: h.rt.Client(), configs: map[string]*runtimeapi.ContainerConfig{}}
	opts := h.options()
	opts.Runtime = rt
	h.startWith(opts)

	pod := newPod("linked", "app")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "API_URL", Value: "http://$(WEB_API_SERVICE_HOST):$(WEB_API_SERVICE_PORT_HTTP)"}}
	h.createPod(pod)
	h.waitPod("linked", "the pod running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	cfg := rt.config("app")
	if cfg == nil {
		t.Fatal("no container config recorded")
	}
	got := map[string]string{}
	for _, kv := range cfg.Envs {
		got[kv.Key] = string(kv.Value)
	}
	for k, want := range map[string]string{
		"API_URL":                   "http://10.96.0.40:8080",
		"WEB_API_SERVICE_HOST":      "10.96.0.40",
		"WEB_API_SERVICE_PORT_HTTP": "8080",
		"WEB_API_PORT_8080_TCP":     "tcp://10.96.0.40:8080",
		"KUBERNETES_SERVICE_HOST":   "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":   "443",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "PEERS_") || strings.HasPrefix(k, "CACHE_") {
			t.Errorf("unexpected %s: a headless Service and another namespace's give none", k)
		}
	}
}

// A host-network pod's sandbox has no IP of its own (containerd reports none): the
// pod's IP is the node's, in its status and in the downward API's environment (upstream's
// e2e 'should provide host IP and pod IP as an env var if pod uses host network').
func TestHostNetworkPodIPInEnvironment(t *testing.T) {
	h := newHarness(t)
	rt := &recordingRuntime{RuntimeService: h.rt.Client(), configs: map[string]*runtimeapi.ContainerConfig{}}
	opts := h.options()
	opts.Runtime = rt
	h.startWith(opts)
	pod := newPod("hostnet", "app")
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
	}
	h.createPod(pod)
	p := h.waitPod("hostnet", "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	cfg := rt.config("app")
	if cfg == nil {
		t.Fatal("no container config recorded")
	}
	got := map[string]string{}
	for _, kv := range cfg.Envs {
		got[kv.Key] = string(kv.Value)
	}
	if got["POD_IP"] != opts.NodeIP || got["HOST_IP"] != opts.NodeIP || p.Status.PodIP != opts.NodeIP {
		t.Errorf("POD_IP %q HOST_IP %q status.podIP %q, want the node's %q", got["POD_IP"], got["HOST_IP"], p.Status.PodIP, opts.NodeIP)
	}
}
