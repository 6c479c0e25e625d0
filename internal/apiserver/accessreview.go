package apiserver

import (
	"context"
	"fmt"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/apiserver/authz"
	"mizzen/internal/registry"
)

var (
	subjectAccessReviewsGVR      = authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews")
	selfSubjectAccessReviewsGVR  = authorizationv1.SchemeGroupVersion.WithResource("selfsubjectaccessreviews")
	localSubjectAccessReviewsGVR = authorizationv1.SchemeGroupVersion.WithResource("localsubjectaccessreviews")
	selfSubjectRulesReviewsGVR   = authorizationv1.SchemeGroupVersion.WithResource("selfsubjectrulesreviews")
)

// decodeReview reads a create-only request's body into obj, of kind, applying the
// request's field validation.
func (s *Server) decodeReview(w http.ResponseWriter, r *http.Request, kind string, obj runtime.Object) (outputFormat, bool) {
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return format, false
	}
	strictErr, err := s.codecs.decodeInto(requestMediaType(r), data, authorizationv1.SchemeGroupVersion.WithKind(kind), obj)
	if err == nil {
		err = applyFieldValidation(w, r, strictErr)
	}
	if err != nil {
		s.writeError(w, r, err)
		return format, false
	}
	return format, true
}

// validateAccessReviewSpec checks what every access review's spec needs: exactly one
// of resourceAttributes and nonResourceAttributes.
func validateAccessReviewSpec(res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch {
	case res != nil && nonRes != nil:
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), nonRes, "cannot be specified in combination with resourceAttributes"))
	case res == nil && nonRes == nil:
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes"), res, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	return errs
}

func invalidReview(kind string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName, Kind: kind}, "", errs)
}

// reviewAttributes turns a review's attributes into an authorization question.
func reviewAttributes(user registry.User, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) authz.Attributes {
	if res != nil {
		return authz.Attributes{User: user, Verb: res.Verb, ResourceRequest: true, Group: res.Group, Version: res.Version,
			Resource: res.Resource, Subresource: res.Subresource, Namespace: res.Namespace, Name: res.Name}
	}
	return authz.Attributes{User: user, Verb: nonRes.Verb, Path: nonRes.Path}
}

// review answers an access review from the configured authorizer (everything is
// allowed without one).
func (s *Server) review(ctx context.Context, a authz.Attributes) authorizationv1.SubjectAccessReviewStatus {
	if s.cfg.Authorizer == nil {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	}
	ok, reason := s.cfg.Authorizer.Authorize(ctx, a)
	return authorizationv1.SubjectAccessReviewStatus{Allowed: ok, Reason: reason}
}

func reviewUser(spec *authorizationv1.SubjectAccessReviewSpec) registry.User {
	u := registry.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range spec.Extra {
			u.Extra[k] = v
		}
	}
	return u
}

// createSubjectAccessReview answers POST subjectaccessreviews: may spec.user (in
// spec.groups) do what the spec describes? Nothing is stored.
func (s *Server) createSubjectAccessReview(w http.ResponseWriter, r *http.Request, _ *requestInfo) {
	review := &authorizationv1.SubjectAccessReview{}
	format, ok := s.decodeReview(w, r, "SubjectAccessReview", review)
	if !ok {
		return
	}
	errs := validateAccessReviewSpec(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
	if review.Spec.User == "" && len(review.Spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), review.Spec.User, "at least one of user or group must be specified"))
	}
	if len(errs) > 0 {
		s.writeError(w, r, invalidReview("SubjectAccessReview", errs))
		return
	}
	review.Status = s.review(r.Context(), reviewAttributes(reviewUser(&review.Spec), review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes))
	review.SetGroupVersionKind(authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"))
	s.writeObject(w, http.StatusCreated, review, format.mediaType)
}

// createLocalSubjectAccessReview is a SubjectAccessReview limited to the namespace it
// is created in.
func (s *Server) createLocalSubjectAccessReview(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	review := &authorizationv1.LocalSubjectAccessReview{}
	format, ok := s.decodeReview(w, r, "LocalSubjectAccessReview", review)
	if !ok {
		return
	}
	errs := validateAccessReviewSpec(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes)
	if review.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), review.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if review.Spec.User == "" && len(review.Spec.Groups) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "user"), review.Spec.User, "at least one of user or group must be specified"))
	}
	if len(errs) > 0 {
		s.writeError(w, r, invalidReview("LocalSubjectAccessReview", errs))
		return
	}
	if review.Spec.ResourceAttributes.Namespace != info.Namespace {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", info.Namespace)))
		return
	}
	if review.Namespace == "" {
		review.Namespace = info.Namespace
	}
	review.Status = s.review(r.Context(), reviewAttributes(reviewUser(&review.Spec), review.Spec.ResourceAttributes, nil))
	review.SetGroupVersionKind(authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview"))
	s.writeObject(w, http.StatusCreated, review, format.mediaType)
}

// createSelfSubjectAccessReview answers `kubectl auth can-i VERB RESOURCE`: may the
// requester do it?
func (s *Server) createSelfSubjectAccessReview(w http.ResponseWriter, r *http.Request, _ *requestInfo) {
	review := &authorizationv1.SelfSubjectAccessReview{}
	format, ok := s.decodeReview(w, r, "SelfSubjectAccessReview", review)
	if !ok {
		return
	}
	if errs := validateAccessReviewSpec(review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes); len(errs) > 0 {
		s.writeError(w, r, invalidReview("SelfSubjectAccessReview", errs))
		return
	}
	user, ok := registry.UserFrom(r.Context())
	if !ok {
		s.writeError(w, r, apierrors.NewBadRequest("no user present on request"))
		return
	}
	review.Status = s.review(r.Context(), reviewAttributes(user, review.Spec.ResourceAttributes, review.Spec.NonResourceAttributes))
	review.SetGroupVersionKind(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"))
	s.writeObject(w, http.StatusCreated, review, format.mediaType)
}

// createSelfSubjectRulesReview answers `kubectl auth can-i --list`: the rules the
// requester holds in spec.namespace.
func (s *Server) createSelfSubjectRulesReview(w http.ResponseWriter, r *http.Request, _ *requestInfo) {
	review := &authorizationv1.SelfSubjectRulesReview{}
	format, ok := s.decodeReview(w, r, "SelfSubjectRulesReview", review)
	if !ok {
		return
	}
	if review.Spec.Namespace == "" {
		s.writeError(w, r, apierrors.NewBadRequest("no namespace on request"))
		return
	}
	user, ok := registry.UserFrom(r.Context())
	if !ok {
		s.writeError(w, r, apierrors.NewBadRequest("no user present on request"))
		return
	}
	var resolver authz.RuleResolver = authz.AlwaysAllow{}
	if s.cfg.Authorizer != nil {
		var ok bool
		if resolver, ok = s.cfg.Authorizer.(authz.RuleResolver); !ok {
			review.Status.Incomplete = true
			review.Status.EvaluationError = "the authorizer cannot list rules"
			resolver = nil
		}
	}
	if resolver != nil {
		review.Status = rulesReviewStatus(resolver.RulesFor(user, review.Spec.Namespace))
	}
	review.SetGroupVersionKind(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"))
	s.writeObject(w, http.StatusCreated, review, format.mediaType)
}

// rulesReviewStatus splits RBAC rules into resource and non-resource rules.
func rulesReviewStatus(rules []rbacv1.PolicyRule) authorizationv1.SubjectRulesReviewStatus {
	status := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{},
	}
	for _, rule := range rules {
		if len(rule.Resources) > 0 {
			status.ResourceRules = append(status.ResourceRules, authorizationv1.ResourceRule{
				Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames})
		}
		if len(rule.NonResourceURLs) > 0 {
			status.NonResourceRules = append(status.NonResourceRules, authorizationv1.NonResourceRule{
				Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
		}
	}
	return status
}
