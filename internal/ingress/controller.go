package ingress

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// controller keeps the proxy's configuration in step with the cluster: it watches
// Ingresses, IngressClasses, Services, EndpointSlices and Secrets, rebuilds the
// configuration on every change and swaps it in, then writes the status of the
// Ingresses it serves and events for what it cannot serve.
type controller struct {
	client    kubernetes.Interface
	className string
	// status is the address written to status.loadBalancer.ingress.
	status   networkingv1.IngressLoadBalancerIngress
	log      *slog.Logger
	recorder record.EventRecorder
	fallback *tls.Certificate

	current atomic.Pointer[config]
	changed chan struct{}

	ingresses cache.Indexer
	classes   cache.Indexer
	services  cache.Indexer
	slices    cache.Indexer
	secrets   cache.Indexer
	synced    []cache.InformerSynced

	// counters are the backends' round-robin positions (used by sync only).
	counters map[upstreamKey]*atomic.Uint64

	mu       sync.Mutex
	keyPairs map[string]cachedKeyPair // secret namespace/name
	warned   map[string]bool          // events of the last sync: uid, reason, message
}

type cachedKeyPair struct {
	sum  [32]byte
	cert *tls.Certificate
	err  error
}

const serviceNameIndex = "serviceName"

func newController(client kubernetes.Interface, className string, status networkingv1.IngressLoadBalancerIngress, fallback *tls.Certificate, log *slog.Logger) (*controller, informers.SharedInformerFactory, error) {
	c := &controller{
		client: client, className: className, status: status, log: log, fallback: fallback,
		changed:  make(chan struct{}, 1),
		keyPairs: map[string]cachedKeyPair{}, warned: map[string]bool{}, counters: map[upstreamKey]*atomic.Uint64{},
	}
	c.current.Store(&config{routes: BuildRoutes(nil), fallback: fallback})
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slimSecret))
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.trigger() },
		UpdateFunc: func(any, any) { c.trigger() },
		DeleteFunc: func(any) { c.trigger() },
	}
	add := func(inf cache.SharedIndexInformer) (cache.Indexer, error) {
		reg, err := inf.AddEventHandler(handler)
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, reg.HasSynced)
		return inf.GetIndexer(), nil
	}
	sliceInformer := factory.Discovery().V1().EndpointSlices().Informer()
	if err := sliceInformer.AddIndexers(cache.Indexers{serviceNameIndex: func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
			return nil, nil
		}
		return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
	}}); err != nil {
		return nil, nil, err
	}
	var err error
	if c.ingresses, err = add(factory.Networking().V1().Ingresses().Informer()); err != nil {
		return nil, nil, err
	}
	if c.classes, err = add(factory.Networking().V1().IngressClasses().Informer()); err != nil {
		return nil, nil, err
	}
	if c.services, err = add(factory.Core().V1().Services().Informer()); err != nil {
		return nil, nil, err
	}
	if c.slices, err = add(sliceInformer); err != nil {
		return nil, nil, err
	}
	if c.secrets, err = add(factory.Core().V1().Secrets().Informer()); err != nil {
		return nil, nil, err
	}
	return c, factory, nil
}

// slimSecret keeps only the key pair of TLS-shaped Secrets in the cache: the
// controller watches every Secret and reads no other.
func slimSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Secret{ObjectMeta: s.ObjectMeta, Type: s.Type}
	slim.ManagedFields = nil
	if crt, ok := s.Data[corev1.TLSCertKey]; ok {
		slim.Data = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: s.Data[corev1.TLSPrivateKeyKey]}
	}
	return slim, nil
}

func (c *controller) trigger() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// run starts the event sink and rebuilds on every change until ctx ends.
func (c *controller) run(ctx context.Context) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	c.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "mizzen-ingress-controller"})
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		case <-retry.C:
		}
		if !c.sync(ctx) {
			retry.Reset(5 * time.Second)
		}
	}
}

// sync builds and swaps in a new configuration, then brings the Ingresses' status and
// events up to date. It reports false when a status write failed, to be retried.
func (c *controller) sync(ctx context.Context) bool {
	var classes []*networkingv1.IngressClass
	for _, o := range c.classes.List() {
		classes = append(classes, o.(*networkingv1.IngressClass))
	}
	sel := newClassSelector(c.className, classes)
	var served, others []*networkingv1.Ingress
	for _, o := range c.ingresses.List() {
		ing := o.(*networkingv1.Ingress)
		if sel.serves(ing) {
			served = append(served, ing)
		} else {
			others = append(others, ing)
		}
	}
	cfg, problems := build(c.state(served), c.fallback)
	c.current.Store(cfg)
	c.log.Debug("configuration swapped in", "ingresses", len(served), "backends", len(cfg.upstreams), "certificates", len(cfg.certs))
	// Events go out when a problem appears (again), not on every rebuild while it lasts.
	current := map[string]bool{}
	for _, p := range problems {
		c.warn(p, current)
	}
	for _, ing := range served {
		c.noteServed(ing, current)
	}
	c.mu.Lock()
	c.warned = current
	c.mu.Unlock()
	ok := true
	if c.status.IP == "" && c.status.Hostname == "" {
		return ok
	}
	want := []networkingv1.IngressLoadBalancerIngress{c.status}
	for _, ing := range served {
		if !equality.Semantic.DeepEqual(ing.Status.LoadBalancer.Ingress, want) {
			ok = c.writeStatus(ctx, ing, want) && ok
		}
	}
	// An Ingress that left this class no longer carries this controller's address.
	for _, ing := range others {
		if equality.Semantic.DeepEqual(ing.Status.LoadBalancer.Ingress, want) {
			ok = c.writeStatus(ctx, ing, nil) && ok
		}
	}
	return ok
}

func (c *controller) writeStatus(ctx context.Context, ing *networkingv1.Ingress, lb []networkingv1.IngressLoadBalancerIngress) bool {
	up := ing.DeepCopy()
	up.Status.LoadBalancer.Ingress = lb
	if _, err := c.client.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil {
		c.log.Info("writing ingress status", "ingress", ing.Namespace+"/"+ing.Name, "err", err)
		return false
	}
	return true
}

// warn sends a Warning event about p unless the last sync already reported it, and
// records it in current.
func (c *controller) warn(p problem, current map[string]bool) {
	if p.ingress == nil {
		return
	}
	key := string(p.ingress.UID) + "\x00" + p.reason + "\x00" + p.message
	current[key] = true
	c.mu.Lock()
	seen := c.warned[key]
	c.mu.Unlock()
	if seen {
		return
	}
	c.log.Info("ingress not served as asked", "ingress", p.ingress.Namespace+"/"+p.ingress.Name, "reason", p.reason, "message", p.message)
	c.recorder.Event(p.ingress, corev1.EventTypeWarning, p.reason, p.message)
}

// noteServed sends ingress-nginx's Normal "Sync" event once per generation served.
func (c *controller) noteServed(ing *networkingv1.Ingress, current map[string]bool) {
	key := string(ing.UID) + "\x00sync\x00" + strconv.FormatInt(ing.Generation, 10)
	current[key] = true
	c.mu.Lock()
	seen := c.warned[key]
	c.mu.Unlock()
	if !seen {
		c.recorder.Event(ing, corev1.EventTypeNormal, "Sync", "Scheduled for sync")
	}
}

func (c *controller) state(served []*networkingv1.Ingress) state {
	return state{
		ingresses: served,
		service: func(ns, name string) (*corev1.Service, error) {
			o, ok, err := c.services.GetByKey(ns + "/" + name)
			if err != nil || !ok {
				return nil, err
			}
			return o.(*corev1.Service), nil
		},
		slices: func(ns, svc string) ([]*discoveryv1.EndpointSlice, error) {
			objs, err := c.slices.ByIndex(serviceNameIndex, ns+"/"+svc)
			if err != nil {
				return nil, err
			}
			out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
			for _, o := range objs {
				out = append(out, o.(*discoveryv1.EndpointSlice))
			}
			return out, nil
		},
		secret: func(ns, name string) (*corev1.Secret, error) {
			o, ok, err := c.secrets.GetByKey(ns + "/" + name)
			if err != nil || !ok {
				return nil, err
			}
			return o.(*corev1.Secret), nil
		},
		keyPair:  c.keyPair,
		counters: c.counters,
	}
}

// keyPair parses a Secret's certificate and key, once per content.
func (c *controller) keyPair(s *corev1.Secret) (*tls.Certificate, error) {
	h := sha256.New()
	h.Write(s.Data[corev1.TLSCertKey])
	h.Write([]byte{0})
	h.Write(s.Data[corev1.TLSPrivateKeyKey])
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	key := s.Namespace + "/" + s.Name
	c.mu.Lock()
	cached, ok := c.keyPairs[key]
	c.mu.Unlock()
	if ok && cached.sum == sum {
		return cached.cert, cached.err
	}
	cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	entry := cachedKeyPair{sum: sum, err: err}
	if err == nil {
		entry.cert = &cert
	}
	c.mu.Lock()
	c.keyPairs[key] = entry
	c.mu.Unlock()
	return entry.cert, entry.err
}
