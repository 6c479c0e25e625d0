package delegatedauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// The identity of a request without credentials, as upstream's anonymous
// authenticator names it.
const (
	AnonymousUser       = "system:anonymous"
	UnauthenticatedGrp  = "system:unauthenticated"
	AuthenticatedGroup  = "system:authenticated"
	certRefreshInterval = time.Minute
)

// Delegated authenticates a request by its client certificate or bearer token (else
// as system:anonymous) and authorizes it by asking the apiserver.
type Delegated struct {
	certs      atomic.Pointer[CertAuthenticator]
	Tokens     *TokenReviewer
	Authorizer *Authorizer
	Log        *slog.Logger
	// DisableAnonymous refuses a request without credentials (an error, so 401)
	// rather than taking it as system:anonymous, as upstream's --anonymous-auth=false.
	DisableAnonymous bool
}

// ErrNoCredentials is a request without credentials when anonymous requests are
// disabled.
var ErrNoCredentials = errors.New("no client certificate or bearer token")

// New asks the apiserver through client with upstream's delegated defaults. Client
// certificates are accepted once the certificate authenticator is set
// (SetCertAuthenticator or WatchCertAuthenticator).
func New(client kubernetes.Interface, log *slog.Logger) *Delegated {
	if log == nil {
		log = slog.Default()
	}
	return &Delegated{
		Tokens:     NewTokenReviewer(client.AuthenticationV1().TokenReviews(), 0),
		Authorizer: NewAuthorizer(client.AuthorizationV1().SubjectAccessReviews()),
		Log:        log,
	}
}

// SetCertAuthenticator replaces how client certificates are verified.
func (d *Delegated) SetCertAuthenticator(a *CertAuthenticator) { d.certs.Store(a) }

// WatchCertAuthenticator loads the certificate authenticator from src and the
// apiserver's ConfigMap, then reloads it every minute until ctx ends, so a ConfigMap
// published (or rotated) later is taken up, as upstream follows it. The first load's
// error is returned; a later one keeps the previous authenticator.
func (d *Delegated) WatchCertAuthenticator(ctx context.Context, client kubernetes.Interface, src CertSources) error {
	a, _, err := LoadCertAuthenticator(ctx, client, src)
	if err != nil {
		return err
	}
	d.SetCertAuthenticator(a)
	go func() {
		t := time.NewTicker(certRefreshInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			a, _, err := LoadCertAuthenticator(ctx, client, src)
			if err != nil {
				if ctx.Err() == nil {
					d.Log.WarnContext(ctx, "reloading the client CAs", "err", err)
				}
				continue
			}
			d.SetCertAuthenticator(a)
		}
	}()
	return nil
}

// Authenticate returns the request's user: by its client certificate, else its bearer
// token, else anonymous. An error (a refused certificate or token, or a review that
// failed) means the request is to be answered 401, as upstream does not take bad
// credentials for none.
func (d *Delegated) Authenticate(r *http.Request) (*User, error) {
	var errs []error
	u, ok, err := d.certs.Load().AuthenticateRequest(r)
	if ok {
		return withAuthenticatedGroup(u), nil
	}
	if err != nil {
		errs = append(errs, err)
	}
	if token, present, err := bearerToken(r); present {
		if err == nil {
			u, ok, err = d.Tokens.AuthenticateToken(r.Context(), token)
			if ok {
				return withAuthenticatedGroup(u), nil
			}
			if err == nil {
				err = errors.New("invalid bearer token")
			}
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if d.DisableAnonymous {
		return nil, ErrNoCredentials
	}
	return &User{Name: AnonymousUser, Groups: []string{UnauthenticatedGrp}}, nil
}

// bearerToken reads "Authorization: Bearer <token>"; an empty token is an error.
func bearerToken(r *http.Request) (token string, present bool, err error) {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	if auth == "" {
		return "", false, nil
	}
	parts := strings.SplitN(auth, " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") {
		return "", false, nil
	}
	if parts[1] == "" {
		return "", true, errors.New("empty bearer token")
	}
	return parts[1], true, nil
}

func withAuthenticatedGroup(u *User) *User {
	if slices.Contains(u.Groups, AuthenticatedGroup) {
		return u
	}
	c := *u
	c.Groups = append(slices.Clone(u.Groups), AuthenticatedGroup)
	return &c
}

// Filter serves next to requests that authenticate and are authorized: the verb is
// the lower-cased method and the resource the path, as upstream's non-resource
// requests. Others get upstream's answers: 401 Unauthorized for bad credentials, 403
// Forbidden naming the user, verb and path, 500 when the apiserver could not be asked.
func (d *Delegated) Filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := d.Authenticate(r)
		if err != nil {
			d.Log.DebugContext(r.Context(), "unable to authenticate the request", "path", r.URL.Path, "err", err)
			WriteStatus(w, apierrors.NewUnauthorized("Unauthorized"))
			return
		}
		verb := strings.ToLower(r.Method)
		decision, err := d.Authorizer.Authorize(r.Context(), u, verb, r.URL.Path)
		if err != nil {
			d.Log.WarnContext(r.Context(), "authorization review failed", "path", r.URL.Path, "user", u.Name, "err", err)
			http.Error(w, fmt.Sprintf("Internal Server Error: %q: %v", r.URL.Path, err), http.StatusInternalServerError)
			return
		}
		if !decision.Allowed {
			msg := fmt.Sprintf("User %q cannot %s path %q", u.Name, verb, r.URL.Path)
			if decision.Reason != "" {
				msg += ": " + decision.Reason
			}
			WriteStatus(w, apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(msg)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// WriteStatus answers err's Status as JSON with its code, as upstream's servers do.
func WriteStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(append(body, '\n'))
}
