// Package serverjoin hands a joining server the secrets every server of a cluster
// shares (the cluster CA and its key, the etcd CA, the service-account signing key,
// the front-proxy CA) and where the etcd members serve clients.
//
// The joining server holds a server-role join token (package jointoken). It verifies
// the server's CA against the token's hash first, then asks over TLS with that CA,
// presenting the token's credential; the server checks the credential against the
// token's bootstrap Secret itself (role server, not expired) and answers with the
// secrets sealed with AES-256-GCM under a key derived (HKDF-SHA256) from the token's
// secret half, so that they never cross the network in the clear, not even inside a
// TLS session a proxy could terminate.
package serverjoin

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/jointoken"
)

// Path is where a server answers joining servers, beside the API on its port.
const Path = "/v1-mizzen/server-bootstrap"

// Secrets are what a joining server receives.
type Secrets struct {
	// Files are the shared files by their path relative to the data directory.
	Files map[string][]byte `json:"files"`
	// EtcdClientURLs are where the cluster's etcd members serve clients (mutual TLS
	// with the etcd CA of Files).
	EtcdClientURLs []string `json:"etcdClientURLs"`
}

// sealed is the answer's body: Secrets as JSON, sealed.
type sealed struct {
	Salt       []byte `json:"salt"`
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

const keyInfo = "mizzen server-bootstrap v1"

func aead(secret string, salt []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, []byte(secret), salt, keyInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func seal(secret string, plaintext []byte) (*sealed, error) {
	s := &sealed{Salt: make([]byte, 32), Nonce: make([]byte, 12)}
	_, _ = rand.Read(s.Salt)
	_, _ = rand.Read(s.Nonce)
	a, err := aead(secret, s.Salt)
	if err != nil {
		return nil, err
	}
	s.Ciphertext = a.Seal(nil, s.Nonce, plaintext, []byte(keyInfo))
	return s, nil
}

func (s *sealed) open(secret string) ([]byte, error) {
	a, err := aead(secret, s.Salt)
	if err != nil {
		return nil, err
	}
	if len(s.Nonce) != a.NonceSize() {
		return nil, errors.New("malformed answer: bad nonce")
	}
	return a.Open(nil, s.Nonce, s.Ciphertext, []byte(keyInfo))
}

// Handler answers joining servers.
type Handler struct {
	// Client reads bootstrap token Secrets (with the server's own credentials).
	Client kubernetes.Interface
	// Collect gathers the secrets to hand out.
	Collect func(ctx context.Context) (*Secrets, error)
	Log     *slog.Logger
	// Now is the clock tokens expire by; time.Now when nil.
	Now func() time.Time
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeStatus(w, apierrors.NewMethodNotSupported(schemaResource, r.Method))
		return
	}
	secret, status := h.authenticate(r)
	if status != nil {
		h.Log.Warn("refused a joining server", "remote", r.RemoteAddr, "reason", status.ErrStatus.Message)
		writeStatus(w, status)
		return
	}
	secrets, err := h.Collect(r.Context())
	if err != nil {
		var se *apierrors.StatusError
		if !errors.As(err, &se) {
			se = apierrors.NewInternalError(err)
		}
		writeStatus(w, se)
		return
	}
	plain, err := json.Marshal(secrets)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	body, err := seal(secret, plain)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	h.Log.Info("handed the cluster's shared secrets to a joining server", "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// authenticate checks the request's bearer token against its bootstrap Secret and
// returns the token's secret half, or the Status to refuse with.
func (h *Handler) authenticate(r *http.Request) (string, *apierrors.StatusError) {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", apierrors.NewUnauthorized("a server-role join token is required (Authorization: Bearer <id>.<secret>)")
	}
	id, secret, ok := jointoken.ParseBearer(strings.TrimSpace(bearer))
	if !ok {
		return "", apierrors.NewUnauthorized("the join token is malformed")
	}
	s, err := h.Client.CoreV1().Secrets(jointoken.Namespace).Get(r.Context(), jointoken.SecretPrefix+id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", apierrors.NewUnauthorized("unknown join token (it was deleted, or is for another cluster)")
	} else if err != nil {
		return "", apierrors.NewInternalError(err)
	}
	info, want, err := jointoken.Read(s)
	if err != nil || subtle.ConstantTimeCompare([]byte(secret), []byte(want)) != 1 {
		return "", apierrors.NewUnauthorized("the join token's secret is wrong")
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if info.Expired(now()) {
		return "", apierrors.NewUnauthorized(fmt.Sprintf("the join token expired at %s", info.Expires.UTC().Format(time.RFC3339)))
	}
	if info.Role() != jointoken.RoleServer {
		return "", apierrors.NewForbidden(schemaResource, id,
			fmt.Errorf("token %s joins %q, not servers: create one with `mizzen token create --role server`", id, orNone(string(info.Role()))))
	}
	return secret, nil
}

var schemaResource = schema.GroupResource{Resource: "server-bootstrap"}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// Fetch joins through server (https://HOST:PORT) with tok: it verifies the server's
// CA against the token, then asks for the secrets and opens them. It returns the
// cluster CA (verified) beside them.
func Fetch(ctx context.Context, server string, tok jointoken.Token) (*Secrets, []byte, error) {
	caPEM, err := tok.FetchCA(ctx, server)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(server, "/")+Path, bytes.NewReader(nil))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.Bearer())
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("asking %s for the cluster's secrets: %w", server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			return nil, nil, fmt.Errorf("%s refused to let this server join: %s", server, st.Message)
		}
		return nil, nil, fmt.Errorf("%s refused to let this server join: %s", server, resp.Status)
	}
	var s sealed
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, nil, fmt.Errorf("the answer of %s is not sealed secrets: %w", server, err)
	}
	plain, err := s.open(tok.Secret)
	if err != nil {
		return nil, nil, fmt.Errorf("the token's secret does not open the answer of %s: %w", server, err)
	}
	var out Secrets
	if err := json.Unmarshal(plain, &out); err != nil {
		return nil, nil, err
	}
	return &out, caPEM, nil
}
