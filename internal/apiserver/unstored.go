package apiserver

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/componentstatus"
	"mizzen/internal/registry"
)

var componentStatusesGVR = corev1.SchemeGroupVersion.WithResource("componentstatuses")

// unstoredResource is a resource that is never stored. Either a client creates one as
// a question and the response carries the answer in its status (TokenReview,
// SelfSubjectReview, the access reviews), taking only POST to its collection; or the
// server computes its objects on each read (componentstatuses), taking only get and
// list.
type unstoredResource struct {
	gvr        schema.GroupVersionResource
	kind       string
	singular   string
	shortNames []string
	// namespaced resources are created in a namespace (LocalSubjectAccessReview).
	namespaced bool
	create     func(s *Server, w http.ResponseWriter, r *http.Request, info *requestInfo)
	// get returns the named object, list all of them, newList an empty list of the
	// kind; printer renders them as a Table.
	get     func(s *Server, ctx context.Context, name string) (runtime.Object, error)
	list    func(s *Server, ctx context.Context) ([]runtime.Object, error)
	newList func() runtime.Object
	printer *registry.Printer
	// deprecated, when set, is the Warning every request for the resource gets.
	deprecated string
}

// verbs are the verbs discovery lists for the resource.
func (u *unstoredResource) verbs() []string {
	var v []string
	if u.create != nil {
		v = append(v, "create")
	}
	if u.get != nil {
		v = append(v, "get")
	}
	if u.list != nil {
		v = append(v, "list")
	}
	return v
}

// unstoredResources lists the unstored resources the server serves.
func unstoredResources() []unstoredResource {
	return []unstoredResource{
		{gvr: selfSubjectReviewsGVR, kind: "SelfSubjectReview", singular: "selfsubjectreview", create: (*Server).createSelfSubjectReview},
		{gvr: tokenReviewsGVR, kind: "TokenReview", singular: "tokenreview", create: (*Server).createTokenReview},
		{gvr: subjectAccessReviewsGVR, kind: "SubjectAccessReview", singular: "subjectaccessreview", create: (*Server).createSubjectAccessReview},
		{gvr: selfSubjectAccessReviewsGVR, kind: "SelfSubjectAccessReview", singular: "selfsubjectaccessreview", create: (*Server).createSelfSubjectAccessReview},
		{gvr: localSubjectAccessReviewsGVR, kind: "LocalSubjectAccessReview", singular: "localsubjectaccessreview", namespaced: true, create: (*Server).createLocalSubjectAccessReview},
		{gvr: selfSubjectRulesReviewsGVR, kind: "SelfSubjectRulesReview", singular: "selfsubjectrulesreview", create: (*Server).createSelfSubjectRulesReview},
		{gvr: componentStatusesGVR, kind: "ComponentStatus", singular: "componentstatus", shortNames: []string{"cs"},
			get: (*Server).getComponentStatus, list: (*Server).listComponentStatuses,
			newList:    func() runtime.Object { return &corev1.ComponentStatusList{Items: []corev1.ComponentStatus{}} },
			printer:    &registry.Printer{Columns: componentstatus.Columns(), Row: componentstatus.Row},
			deprecated: "v1 ComponentStatus is deprecated in v1.19+"},
	}
}

// unstoredByGVR indexes unstoredResources once: every request is looked up in it.
var unstoredByGVR = func() map[schema.GroupVersionResource]*unstoredResource {
	m := map[schema.GroupVersionResource]*unstoredResource{}
	for _, u := range unstoredResources() {
		m[u.gvr] = &u
	}
	return m
}()

// unstored returns the unstored resource a request names, or nil.
func unstored(gvr schema.GroupVersionResource) *unstoredResource { return unstoredByGVR[gvr] }

// serveUnstored routes a request for an unstored resource: POST to the collection
// creates, GET reads the collection or a named object, when the resource takes that
// verb. Other verbs are not allowed, and named objects of a create-only resource do
// not exist, as upstream answers.
func (s *Server) serveUnstored(w http.ResponseWriter, r *http.Request, info *requestInfo, u *unstoredResource) {
	notAllowed := apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "", 0, false)
	if u.deprecated != "" {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", u.deprecated))
	}
	switch {
	case (info.Namespace != "") != u.namespaced || info.Subresource != "" || (info.Name != "" && u.get == nil):
		s.writeError(w, r, notFound())
	case info.Verb == "watch" && u.list != nil:
		s.writeError(w, r, apierrors.NewMethodNotSupported(u.gvr.GroupResource(), "watch"))
	case r.Method == http.MethodPost && info.Name == "" && u.create != nil:
		u.create(s, w, r, info)
	case r.Method == http.MethodGet && info.Name != "":
		s.getUnstored(w, r, info, u)
	case r.Method == http.MethodGet && u.list != nil:
		s.listUnstored(w, r, u)
	default:
		s.writeError(w, r, notAllowed)
	}
}

// handler is a resource handler for the unstored resource, enough to print it.
func (u *unstoredResource) handler() *resourceHandler {
	return &resourceHandler{Resource: &registry.Resource{GroupVersion: u.gvr.GroupVersion(), Resource: u.gvr.Resource,
		Kind: u.kind, NewList: u.newList, SingularName: u.singular, Namespaced: u.namespaced, ShortNames: u.shortNames, Printer: u.printer}}
}

func (s *Server) getUnstored(w http.ResponseWriter, r *http.Request, info *requestInfo, u *unstoredResource) {
	format, err := negotiate(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, err := u.get(s, r.Context(), info.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.respondObject(w, r, http.StatusOK, u.handler(), obj, format)
}

// listUnstored serves the collection, filtered by the label and field selectors
// (metadata.name), as the object, a Table or metadata only.
func (s *Server) listUnstored(w http.ResponseWriter, r *http.Request, u *unstoredResource) {
	format, err := negotiate(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		s.writeError(w, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		s.writeError(w, r, apierrors.NewBadRequest(err.Error()))
		return
	}
	all, err := u.list(s, r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var objs []runtime.Object
	for _, obj := range all {
		acc := accessor(obj)
		if ls.Matches(labels.Set(acc.GetLabels())) && fs.Matches(fields.Set{"metadata.name": acc.GetName()}) {
			objs = append(objs, obj)
		}
	}
	s.writeList(w, r, format, u.handler(), objs, metav1.ListMeta{})
}

// components are the components componentstatuses reports, etcd through this
// server's store.
func (s *Server) components() []componentstatus.Component {
	return componentstatus.Defaults(s.store.CurrentRevision)
}

// getComponentStatus probes the named component. An unknown name is a plain error,
// 500 with "Component not found: <name>", as upstream answers.
func (s *Server) getComponentStatus(ctx context.Context, name string) (runtime.Object, error) {
	for _, c := range s.components() {
		if c.Name == name {
			return componentstatus.Status(ctx, c), nil
		}
	}
	return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure,
		Code: http.StatusInternalServerError, Message: "Component not found: " + name}}
}

// listComponentStatuses probes every component, concurrently.
func (s *Server) listComponentStatuses(ctx context.Context) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, cs := range componentstatus.Statuses(ctx, s.components()) {
		out = append(out, cs)
	}
	return out, nil
}
