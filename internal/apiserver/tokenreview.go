package apiserver

import (
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/registry"
)

var (
	tokenReviewsGVR       = authenticationv1.SchemeGroupVersion.WithResource("tokenreviews")
	tokenReviewGVK        = authenticationv1.SchemeGroupVersion.WithKind("TokenReview")
	selfSubjectReviewsGVR = authenticationv1.SchemeGroupVersion.WithResource("selfsubjectreviews")
	selfSubjectReviewGVK  = authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview")
)

// createTokenReview answers POST tokenreviews: whether spec.token authenticates, as a
// request's bearer token would, for spec.audiences (this server's audiences when
// empty). A refused token is still 201 Created, with authenticated false and the
// reason in status.error. Nothing is stored.
func (s *Server) createTokenReview(w http.ResponseWriter, r *http.Request, _ *requestInfo) {
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	review := &authenticationv1.TokenReview{}
	strictErr, err := s.codecs.decodeInto(requestMediaType(r), data, tokenReviewGVK, review)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := applyFieldValidation(w, r, strictErr); err != nil {
		s.writeError(w, r, err)
		return
	}
	if review.Spec.Token == "" {
		s.writeError(w, r, apierrors.NewBadRequest("token is required for TokenReview in authentication"))
		return
	}
	audiences := review.Spec.Audiences
	if len(audiences) == 0 {
		audiences = s.audiences()
	}
	review.Status = authenticationv1.TokenReviewStatus{}
	user, granted, err := s.reviewToken(r.Context(), review.Spec.Token, audiences)
	if err != nil {
		review.Status.Error = err.Error()
	} else {
		review.Status.Authenticated = true
		review.Status.Audiences = granted
		review.Status.User = authenticationv1.UserInfo{Username: user.Name, UID: user.UID, Groups: user.Groups,
			Extra: extraValues(user.Extra)}
	}
	review.SetGroupVersionKind(tokenReviewGVK)
	s.writeObject(w, http.StatusCreated, review, format.mediaType)
}

// createSelfSubjectReview answers POST selfsubjectreviews (kubectl auth whoami): who
// the server takes the requester for. Nothing is stored.
func (s *Server) createSelfSubjectReview(w http.ResponseWriter, r *http.Request, _ *requestInfo) {
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	strictErr, err := s.codecs.decodeInto(requestMediaType(r), data, selfSubjectReviewGVK, &authenticationv1.SelfSubjectReview{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := applyFieldValidation(w, r, strictErr); err != nil {
		s.writeError(w, r, err)
		return
	}
	user, ok := registry.UserFrom(r.Context())
	if !ok {
		s.writeError(w, r, apierrors.NewBadRequest("no user present on request"))
		return
	}
	review := &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Now()},
		Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: user.Name, UID: user.UID, Groups: user.Groups, Extra: extraValues(user.Extra)}},
	}
	review.SetGroupVersionKind(selfSubjectReviewGVK)
	s.writeObject(w, http.StatusCreated, review, format.mediaType)
}

func extraValues(extra map[string][]string) map[string]authenticationv1.ExtraValue {
	out := make(map[string]authenticationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}
