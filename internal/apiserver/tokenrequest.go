package apiserver

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/apiserver/satoken"
)

var (
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	secretsGVR         = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	tokenRequestGVK    = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
)

// Token lifetimes, as upstream's TokenRequest applies them.
const (
	defaultTokenSeconds = 3600
	minTokenSeconds     = 600
	// The kubelet's kube-api-access volumes ask for exactly this lifetime; the server
	// extends such tokens to a year (warning after the requested expiry) so that
	// clients that never reload their token keep working, as upstream does by default.
	legacyWarnTokenSeconds = 3607
	extendedTokenLifetime  = 365 * 24 * time.Hour
)

// audiences are the audiences a token must name to be accepted by this server.
func (s *Server) audiences() []string { return s.saTokens.APIAudiences() }

// createToken serves POST serviceaccounts/<name>/token: a TokenRequest in, the same
// request with its status (token and expiry) out.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	if s.cfg.ServiceAccountIssuer == nil {
		s.writeError(w, r, notFound())
		return
	}
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req := &authenticationv1.TokenRequest{}
	if _, err := s.codecs.decodeInto(requestMediaType(r), data, tokenRequestGVK, req); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.issueToken(r.Context(), info.Namespace, info.Name, req, time.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out.SetGroupVersionKind(tokenRequestGVK)
	s.writeObject(w, http.StatusCreated, out, format.mediaType)
}

func (s *Server) issueToken(ctx context.Context, namespace, saName string, req *authenticationv1.TokenRequest, now time.Time) (*authenticationv1.TokenRequest, error) {
	spec := &req.Spec
	if spec.ExpirationSeconds == nil {
		spec.ExpirationSeconds = ptrTo[int64](defaultTokenSeconds)
	}
	if len(spec.Audiences) == 0 {
		spec.Audiences = s.audiences()
	}
	var errs field.ErrorList
	switch exp := *spec.ExpirationSeconds; {
	case exp < minTokenSeconds:
		errs = append(errs, field.Invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration less than 10 minutes"))
	case exp > math.MaxUint32:
		errs = append(errs, field.Invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration larger than 2^32 seconds"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(tokenRequestGVK.GroupKind(), saName, errs)
	}

	reads := &consistentReads{s: s}
	saObj, err := reads.get(ctx, s.handlers[serviceAccountsGVR], namespace, saName)
	if err != nil {
		return nil, err
	}
	sa := saObj.(*corev1.ServiceAccount)
	k8s := &satoken.KubernetesClaims{Namespace: namespace, ServiceAccount: satoken.Ref{Name: sa.Name, UID: string(sa.UID)}}
	if ref := spec.BoundObjectRef; ref != nil {
		if err := s.bindToken(ctx, reads, namespace, sa, ref, k8s); err != nil {
			return nil, err
		}
	}

	lifetime := time.Duration(*spec.ExpirationSeconds) * time.Second
	expiry := now.Add(lifetime)
	if *spec.ExpirationSeconds == legacyWarnTokenSeconds && k8s.Pod != nil {
		warn := expiry.Unix()
		k8s.WarnAfter = &warn
		expiry = now.Add(extendedTokenLifetime)
	}
	token, err := s.cfg.ServiceAccountIssuer.Sign(satoken.Claims{
		Subject:    satoken.Subject(namespace, sa.Name),
		Audience:   spec.Audiences,
		Expiry:     expiry.Unix(),
		IssuedAt:   now.Unix(),
		NotBefore:  now.Unix(),
		ID:         string(uuid.NewUUID()),
		Kubernetes: k8s,
	})
	if err != nil {
		return nil, err
	}
	out := req.DeepCopy()
	out.Name, out.Namespace = sa.Name, namespace
	out.CreationTimestamp = metav1.NewTime(now)
	out.Status = authenticationv1.TokenRequestStatus{
		Token:               token,
		ExpirationTimestamp: metav1.NewTime(now.Add(lifetime)),
	}
	return out, nil
}

// bindToken checks the object a token is bound to and records it in the claims: a Pod
// running as this service account, or a Secret; the UID, when given, must match.
func (s *Server) bindToken(ctx context.Context, reads *consistentReads, namespace string, sa *corev1.ServiceAccount, ref *authenticationv1.BoundObjectReference, k8s *satoken.KubernetesClaims) error {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != "" || (ref.Kind != "Pod" && ref.Kind != "Secret") {
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gv.WithKind(ref.Kind)))
	}
	gvr := podsGVR
	if ref.Kind == "Secret" {
		gvr = secretsGVR
	}
	obj, err := reads.get(ctx, s.handlers[gvr], namespace, ref.Name)
	if err != nil {
		return err
	}
	acc := accessor(obj)
	if ref.UID != "" && ref.UID != acc.GetUID() {
		return apierrors.NewConflict(schema.GroupResource{Resource: ref.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	bound := &satoken.Ref{Name: acc.GetName(), UID: string(acc.GetUID())}
	if pod, ok := obj.(*corev1.Pod); ok {
		if pod.Spec.ServiceAccountName != sa.Name {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", sa.Name))
		}
		k8s.Pod = bound
		if pod.Spec.NodeName != "" {
			if node, err := reads.get(ctx, s.handlers[nodesGVR], "", pod.Spec.NodeName); err == nil {
				k8s.Node = &satoken.Ref{Name: pod.Spec.NodeName, UID: string(accessor(node).GetUID())}
			}
		}
		return nil
	}
	k8s.Secret = bound
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// cachedObject reads an object from the watch cache, falling back to storage for one
// the cache has not seen yet (a pod created a moment ago).
func (s *Server) cachedObject(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	h := s.handlers[gvr]
	if h == nil {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	if e, _, err := s.cache.Get(h.segment, h.key(namespace, name)); err == nil && e != nil {
		return h.presentEntry(e)
	}
	return s.getObject(ctx, h, namespace, name, "")
}

// serveOpenID serves the OpenID discovery document and the key set that verify
// service account tokens outside the cluster; it reports false for other paths.
func (s *Server) serveOpenID(w http.ResponseWriter, r *http.Request) bool {
	signer := s.cfg.ServiceAccountIssuer
	if signer == nil {
		return false
	}
	var body []byte
	var err error
	var contentType string
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		body, err = signer.OpenIDConfiguration("https://" + s.cfg.ExternalAddress + "/openid/v1/jwks")
		contentType = "application/json"
	case "/openid/v1/jwks":
		body, err = signer.JWKS()
		contentType = "application/jwk-set+json"
	default:
		return false
	}
	if err != nil {
		s.writeError(w, r, err)
		return true
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return true
}
