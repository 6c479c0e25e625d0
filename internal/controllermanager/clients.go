package controllermanager

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/ticklimit"
)

// serviceAccountNamespace holds the controllers' ServiceAccounts, as upstream's.
const serviceAccountNamespace = "kube-system"

// controllerTokenSeconds is how long each controller token lives (upstream's
// controller client builder asks for an hour too); it is renewed at 80% of that.
const controllerTokenSeconds = 3600

// clientBuilder makes each controller's API credentials. Without service account
// credentials every controller shares the manager's own, with its name in the user
// agent; with them (--use-service-account-credentials), controller NAME gets a
// token of the ServiceAccount kube-system/NAME from the TokenRequest API, which
// upstream's bootstrap policy binds to the role system:controller:NAME, and the
// manager's own identity only elects, watches and makes those tokens.
type clientBuilder struct {
	root       *rest.Config
	rootClient kubernetes.Interface
	useSA      bool

	mu      sync.Mutex
	sources map[string]*accountToken
}

// config is the rest config controller name works with; nil when the manager has no
// rest config (tests with a fake clientset).
func (b *clientBuilder) config(ctx context.Context, name string) (*rest.Config, error) {
	if b.root == nil {
		return nil, nil
	}
	if !b.useSA {
		cfg := rest.CopyConfig(b.root)
		if cfg.UserAgent == "" {
			cfg.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		cfg.UserAgent += "/" + name
		limit(cfg)
		return cfg, nil
	}
	src := b.source(name)
	// The first token now, so that a controller that cannot get one fails to start
	// with the reason, rather than failing every request later.
	if _, err := src.get(ctx); err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(b.root)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	cfg.UserAgent += "/system:serviceaccount:" + serviceAccountNamespace + ":" + name
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &bearerTransport{src: src, next: rt} }
	limit(cfg)
	return cfg, nil
}

// limit gives cfg a limiter of its own, of its qps and burst, that releases held-back
// requests together (package ticklimit).
func limit(cfg *rest.Config) {
	if cfg.QPS > 0 {
		cfg.RateLimiter = ticklimit.New(cfg.QPS, cfg.Burst)
	}
}

// source is the one token of ServiceAccount name, shared by every client made for it.
func (b *clientBuilder) source(name string) *accountToken {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sources == nil {
		b.sources = map[string]*accountToken{}
	}
	src := b.sources[name]
	if src == nil {
		src = &accountToken{client: b.rootClient, name: name}
		b.sources[name] = src
	}
	return src
}

// accountToken is a ServiceAccount's current token, requested again before it
// expires, or when the apiserver stopped accepting it (the account was deleted and
// made again, say).
type accountToken struct {
	client kubernetes.Interface
	name   string

	mu        sync.Mutex
	token     string
	refreshAt time.Time
	// header is the Authorization header's value for token, made once per token
	// rather than once per request; requests share it and must not modify it.
	header []string
}

func (s *accountToken) get(ctx context.Context) (string, error) {
	token, _, err := s.authorization(ctx)
	return token, err
}

// authorization returns the current token and its Authorization header value.
func (s *accountToken) authorization(ctx context.Context) (string, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && time.Now().Before(s.refreshAt) {
		return s.token, s.header, nil
	}
	if err := s.ensureAccount(ctx); err != nil {
		return "", nil, err
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo[int64](controllerTokenSeconds)}}
	tr, err := s.client.CoreV1().ServiceAccounts(serviceAccountNamespace).CreateToken(ctx, s.name, req, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("requesting a token for the service account %s/%s: %w", serviceAccountNamespace, s.name, err)
	}
	issued := time.Now()
	lifetime := tr.Status.ExpirationTimestamp.Sub(issued)
	s.token, s.refreshAt = tr.Status.Token, issued.Add(lifetime*4/5)
	s.header = []string{"Bearer " + s.token}
	return s.token, s.header, nil
}

// ensureAccount creates the controller's ServiceAccount unless it exists, as
// upstream's controller-manager does.
func (s *accountToken) ensureAccount(ctx context.Context) error {
	_, err := s.client.CoreV1().ServiceAccounts(serviceAccountNamespace).Get(ctx, s.name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the service account %s/%s: %w", serviceAccountNamespace, s.name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: serviceAccountNamespace, Name: s.name}}
	_, err = s.client.CoreV1().ServiceAccounts(serviceAccountNamespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the service account %s/%s: %w", serviceAccountNamespace, s.name, err)
	}
	return nil
}

// reset drops a token the apiserver refused, so that the next request gets a new one.
func (s *accountToken) reset(refused string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == refused {
		s.token = ""
	}
}

// bearerTransport sends the account's current token with every request.
type bearerTransport struct {
	src  *accountToken
	next http.RoundTripper
}

// RoundTrip sends a shallow copy of req with its own header map (a RoundTripper must
// not modify the request it is given); the header values are shared, not copied, as
// nothing below modifies them in place.
func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	token, authorization, err := t.src.authorization(req.Context())
	if err != nil {
		return nil, err
	}
	withToken := *req
	withToken.Header = make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		withToken.Header[k] = v
	}
	withToken.Header["Authorization"] = authorization
	resp, err := t.next.RoundTrip(&withToken)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.src.reset(token)
	}
	return resp, err
}

func (t *bearerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func ptrTo[T any](v T) *T { return &v }
