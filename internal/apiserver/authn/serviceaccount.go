package authn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/satoken"
	"mizzen/internal/registry"
)

var (
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	secretsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	podsGVR            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// ObjectGetter reads the metadata of the objects a token is bound to; any error means
// the object is gone.
type ObjectGetter interface {
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error)
}

// ServiceAccountTokens authenticates ServiceAccount tokens (JWTs) of this server's
// issuers: signed by Signer, for one of Audiences (the issuers when empty), whose
// service account, and bound object if any, still exist with the UIDs the token names.
type ServiceAccountTokens struct {
	// Signer signs and verifies the tokens; nil refuses every token.
	Signer    *satoken.Signer
	Audiences []string
	Objects   ObjectGetter
}

// APIAudiences are the audiences a token must name to be accepted here: without
// configured ones, every issuer the signer accepts, as upstream defaults
// --api-audiences to all of --service-account-issuer, not only the first
// (authenticator.Audiences(Issuers) in pkg/kubeapiserver/options/authentication.go,
// though its flag help says "a single element list").
func (t *ServiceAccountTokens) APIAudiences() []string {
	if len(t.Audiences) > 0 || t.Signer == nil {
		return t.Audiences
	}
	return t.Signer.Issuers()
}

// AuthenticateToken implements TokenAuthenticator. A token that is not a JWT is not
// its kind.
func (t *ServiceAccountTokens) AuthenticateToken(ctx context.Context, token string) (registry.User, bool, error) {
	if !satoken.LooksLikeJWT(token) {
		return registry.User{}, false, nil
	}
	user, _, err := t.Review(ctx, token, t.APIAudiences())
	if err != nil {
		return registry.User{}, false, err
	}
	return *user, true, nil
}

// Why Review refuses a token, in upstream's words (TokenReview shows them).
var (
	errInvalidBearerToken = errors.New("invalid bearer token")
	errTokenInvalidated   = errors.New("service account token has been invalidated")
)

// Review authenticates a bearer token for the given audiences, as a request's token is
// and as TokenReview asks: it returns the user and the audiences the token is good for
// among those asked (the intersection), or why it is refused.
func (t *ServiceAccountTokens) Review(ctx context.Context, token string, audiences []string) (*registry.User, []string, error) {
	signer := t.Signer
	if signer == nil || !satoken.LooksLikeJWT(token) {
		return nil, nil, errInvalidBearerToken
	}
	c, err := signer.Verify(token, audiences, time.Now())
	switch {
	case errors.Is(err, satoken.ErrNotOurs), errors.Is(err, satoken.ErrMalformed):
		return nil, nil, errInvalidBearerToken
	case errors.Is(err, satoken.ErrExpired):
		return nil, nil, errors.New("service account token has expired")
	case errors.Is(err, satoken.ErrNotYet):
		return nil, nil, errors.New("service account token is not valid yet")
	case errors.Is(err, satoken.ErrAudience):
		return nil, nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", c.Audience, audiences)
	case err != nil:
		return nil, nil, err
	case c.Kubernetes == nil:
		return nil, nil, errInvalidBearerToken
	}
	k := c.Kubernetes
	saObj, err := t.Objects.Get(ctx, serviceAccountsGVR, k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		return nil, nil, errTokenInvalidated
	}
	if uid := string(saObj.GetUID()); uid != k.ServiceAccount.UID {
		return nil, nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", uid, k.ServiceAccount.UID)
	}
	extra := map[string][]string{}
	if c.ID != "" {
		extra["authentication.kubernetes.io/credential-id"] = []string{"JTI=" + c.ID}
	}
	if k.Pod != nil {
		obj, err := t.Objects.Get(ctx, podsGVR, k.Namespace, k.Pod.Name)
		if err != nil {
			return nil, nil, errTokenInvalidated
		}
		if uid := string(obj.GetUID()); uid != k.Pod.UID {
			return nil, nil, fmt.Errorf("pod UID (%s) does not match claim (%s)", uid, k.Pod.UID)
		}
		// A pod being deleted keeps its tokens only through a minute of grace.
		if dt := obj.GetDeletionTimestamp(); dt != nil && time.Since(dt.Time) > time.Minute {
			return nil, nil, errTokenInvalidated
		}
		extra["authentication.kubernetes.io/pod-name"] = []string{k.Pod.Name}
		extra["authentication.kubernetes.io/pod-uid"] = []string{k.Pod.UID}
	}
	if k.Secret != nil {
		obj, err := t.Objects.Get(ctx, secretsGVR, k.Namespace, k.Secret.Name)
		if err != nil {
			return nil, nil, errTokenInvalidated
		}
		if uid := string(obj.GetUID()); uid != k.Secret.UID {
			return nil, nil, fmt.Errorf("secret UID (%s) does not match claim (%s)", uid, k.Secret.UID)
		}
	}
	if k.Node != nil {
		extra["authentication.kubernetes.io/node-name"] = []string{k.Node.Name}
		extra["authentication.kubernetes.io/node-uid"] = []string{k.Node.UID}
	}
	var granted []string
	for _, a := range c.Audience {
		if slices.Contains(audiences, a) && !slices.Contains(granted, a) {
			granted = append(granted, a)
		}
	}
	return &registry.User{
		Name:   c.Subject,
		UID:    k.ServiceAccount.UID,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + k.Namespace, AuthenticatedGroup},
		Extra:  extra,
	}, granted, nil
}
