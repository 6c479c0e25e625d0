package jointoken

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The bootstrap token Secret's layout, as upstream defines it (k8s.io/cluster-bootstrap).
const (
	// Namespace holds every bootstrap token Secret.
	Namespace = "kube-system"
	// SecretPrefix begins a bootstrap token Secret's name; the token's id follows.
	SecretPrefix = "bootstrap-token-"

	keyID          = "token-id"
	keySecret      = "token-secret"
	keyExpiration  = "expiration"
	keyDescription = "description"
	keyExtraGroups = "auth-extra-groups"
	usagePrefix    = "usage-bootstrap-"

	// UsageAuthentication lets the apiserver authenticate the token.
	UsageAuthentication = "authentication"
	// UsageSigning lets the bootstrap signer sign cluster-info with it.
	UsageSigning = "signing"

	// BootstrapGroup is the group of every bootstrap token's user.
	BootstrapGroup = "system:bootstrappers"
	// BootstrapUserPrefix begins a bootstrap token's user name; the token's id follows.
	BootstrapUserPrefix = "system:bootstrap:"
)

// Role is what a token lets its holder join as.
type Role string

const (
	// RoleAgent joins a node: its kubelet asks for its credentials with the token.
	RoleAgent Role = "agent"
	// RoleServer joins a server: it receives the cluster's shared secrets with it.
	RoleServer Role = "server"
)

// Group is the extra group a token of the role carries, which RBAC and the server
// join endpoint check.
func (r Role) Group() string { return BootstrapGroup + ":mizzen:" + string(r) }

// Options describe a new token.
type Options struct {
	Role        Role
	Description string
	// TTL is the token's lifetime; 0 means it never expires.
	TTL time.Duration
}

// Info is what a bootstrap token Secret says about its token, without the secret.
type Info struct {
	ID          string
	Description string
	// Expires is zero for a token that never expires.
	Expires time.Time
	Usages  []string
	Groups  []string
}

// Role is the join role the token's groups give it, "" for a plain bootstrap token.
func (i Info) Role() Role {
	for _, r := range []Role{RoleServer, RoleAgent} {
		if slices.Contains(i.Groups, r.Group()) {
			return r
		}
	}
	return ""
}

// Expired tells whether the token can no longer be used at now.
func (i Info) Expired(now time.Time) bool { return !i.Expires.IsZero() && !now.Before(i.Expires) }

// BootstrapSecret is the bootstrap token Secret that makes t usable.
func (t Token) BootstrapSecret(opts Options, now time.Time) (*corev1.Secret, error) {
	if opts.Role != RoleAgent && opts.Role != RoleServer {
		return nil, fmt.Errorf("unknown token role %q (agent or server)", opts.Role)
	}
	if opts.TTL < 0 {
		return nil, errors.New("the token's TTL must not be negative (0 means it never expires)")
	}
	data := map[string][]byte{
		keyID:                             []byte(t.ID),
		keySecret:                         []byte(t.Secret),
		usagePrefix + UsageAuthentication: []byte("true"),
		usagePrefix + UsageSigning:        []byte("true"),
		keyExtraGroups:                    []byte(opts.Role.Group()),
	}
	if opts.Description != "" {
		data[keyDescription] = []byte(opts.Description)
	}
	if opts.TTL > 0 {
		data[keyExpiration] = []byte(now.Add(opts.TTL).UTC().Format(time.RFC3339))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretPrefix + t.ID, Namespace: Namespace},
		Type:       corev1.SecretTypeBootstrapToken,
		Data:       data,
	}, nil
}

// Read parses a bootstrap token Secret; it returns the token's secret half beside
// its description, and an error for a Secret that is not a well-formed token.
func Read(s *corev1.Secret) (Info, string, error) {
	if s.Type != corev1.SecretTypeBootstrapToken {
		return Info{}, "", fmt.Errorf("secret %s is of type %q, not %q", s.Name, s.Type, corev1.SecretTypeBootstrapToken)
	}
	id, secret := string(s.Data[keyID]), string(s.Data[keySecret])
	if !idPattern.MatchString(id) || !secretPattern.MatchString(secret) || s.Name != SecretPrefix+id {
		return Info{}, "", fmt.Errorf("secret %s does not hold a well-formed bootstrap token", s.Name)
	}
	info := Info{ID: id, Description: string(s.Data[keyDescription])}
	if exp := s.Data[keyExpiration]; len(exp) > 0 {
		t, err := time.Parse(time.RFC3339, string(exp))
		if err != nil {
			return Info{}, "", fmt.Errorf("secret %s: expiration %q is not RFC 3339", s.Name, exp)
		}
		info.Expires = t
	}
	for k, v := range s.Data {
		if u, ok := strings.CutPrefix(k, usagePrefix); ok && string(v) == "true" {
			info.Usages = append(info.Usages, u)
		}
	}
	slices.Sort(info.Usages)
	for g := range strings.SplitSeq(string(s.Data[keyExtraGroups]), ",") {
		if g = strings.TrimSpace(g); g != "" {
			info.Groups = append(info.Groups, g)
		}
	}
	return info, secret, nil
}

// Create makes a new token for the cluster whose CA is caPEM and stores its Secret.
func Create(ctx context.Context, client kubernetes.Interface, caPEM []byte, opts Options) (Token, error) {
	t, err := Generate(caPEM)
	if err != nil {
		return Token{}, err
	}
	s, err := t.BootstrapSecret(opts, time.Now())
	if err != nil {
		return Token{}, err
	}
	if _, err := client.CoreV1().Secrets(Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return Token{}, fmt.Errorf("storing the token: %w", err)
	}
	return t, nil
}

// List describes every bootstrap token of the cluster, sorted by id.
func List(ctx context.Context, client kubernetes.Interface) ([]Info, error) {
	secrets, err := client.CoreV1().Secrets(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	var out []Info
	for i := range secrets.Items {
		if info, _, err := Read(&secrets.Items[i]); err == nil {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Delete removes a token, given its id or the whole token, and returns its id.
func Delete(ctx context.Context, client kubernetes.Interface, idOrToken string) (string, error) {
	id := idOrToken
	if t, err := Parse(idOrToken); err == nil {
		id = t.ID
	} else if i, _, ok := ParseBearer(idOrToken); ok {
		id = i
	}
	if !idPattern.MatchString(id) {
		return "", fmt.Errorf("%q is neither a token nor a token id (6 characters of [a-z0-9])", idOrToken)
	}
	err := client.CoreV1().Secrets(Namespace).Delete(ctx, SecretPrefix+id, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("token %q not found", id)
	}
	return id, err
}
