package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/registry"
	"mizzen/internal/registry/core"
	"mizzen/internal/registry/validname"
	"mizzen/internal/storage"
)

// consistentReadTimeout bounds how long a read waits for the cache to catch up.
const consistentReadTimeout = 3 * time.Second

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	if !h.Namespaced && info.Namespace != "" {
		s.writeError(w, r, notFound())
		return
	}
	if h.Namespaced && info.Namespace == "" && info.Verb != "list" && info.Verb != "watch" {
		s.writeError(w, r, notFound())
		return
	}
	if info.Subresource != "" {
		s.serveSubresource(w, r, info, h)
		return
	}
	switch info.Verb {
	case "get":
		s.get(w, r, info, h)
	case "list":
		s.list(w, r, info, h)
	case "watch":
		s.watch(w, r, info, h)
	case "create":
		if info.Name != "" {
			s.writeError(w, r, methodNotAllowed(r, h))
			return
		}
		s.create(w, r, info, h)
	case "update":
		s.update(w, r, info, h, updateMain)
	case "patch":
		s.patch(w, r, info, h, updateMain)
	case "delete":
		s.delete(w, r, info, h)
	case "deletecollection":
		s.deleteCollection(w, r, info, h)
	default:
		s.writeError(w, r, methodNotAllowed(r, h))
	}
}

func methodNotAllowed(r *http.Request, h *resourceHandler) error {
	return apierrors.NewMethodNotSupported(h.GroupVersionResource().GroupResource(), strings.ToLower(r.Method))
}

// get serves one object from the watch cache. A consistent read (no resourceVersion)
// first reads etcd's current revision with a quorum read and waits until the cache
// has caught up to it, as a consistent list does, so the object is the latest as of
// the request, just as a read from etcd would return it; a given resourceVersion
// waits for at least that one. The object's cached encoding, the one its watch events
// and lists send, is written as it is when the client asked for the object itself.
func (s *Server) get(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	format, err := negotiate(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rv := r.URL.Query().Get("resourceVersion")
	e, err := s.getEntry(r.Context(), h, info.Namespace, info.Name, rv)
	if rv == "" && errors.Is(err, storage.ErrTooLargeRV) {
		// The cache is behind etcd by more than the wait allows: read etcd itself, as
		// a consistent read always may.
		obj, err := s.getObject(r.Context(), h, info.Namespace, info.Name, "")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.respondObject(w, r, http.StatusOK, h, obj, format)
		return
	}
	if err != nil {
		s.writeError(w, r, storageError(err, h.GroupVersionResource().GroupResource(), info.Name))
		return
	}
	if format.as == "" && !h.converted() && s.writeEntry(w, e, format.mediaType) {
		return
	}
	obj, err := h.presentEntry(e)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.respondObject(w, r, http.StatusOK, h, obj, format)
}

// getEntry is the cache's entry for one object, at least as new as rv ("" for the
// latest, "0" for any). A storage error is returned as it is (see storageError).
func (s *Server) getEntry(ctx context.Context, h *resourceHandler, namespace, name, rv string) (*storage.Entry, error) {
	gr := h.GroupVersionResource().GroupResource()
	var minRV int64
	if rv == "" {
		cur, err := s.store.CurrentRevision(ctx)
		if err != nil {
			return nil, storageError(err, gr, name)
		}
		minRV = cur
	} else {
		parsed, err := parseRV(rv)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		minRV = parsed
	}
	return s.getEntryAt(ctx, h, namespace, name, minRV)
}

// getEntryAt reads an object from the watch cache once it has reached minRV.
func (s *Server) getEntryAt(ctx context.Context, h *resourceHandler, namespace, name string, minRV int64) (*storage.Entry, error) {
	if err := s.cache.WaitFresh(ctx, minRV, consistentReadTimeout); err != nil {
		return nil, err
	}
	e, _, err := s.cache.Get(h.segment, h.key(namespace, name))
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, apierrors.NewNotFound(h.GroupVersionResource().GroupResource(), name)
	}
	return e, nil
}

// consistentReads reads objects as a GET without a resourceVersion does, all at one
// revision: etcd's current one when the first is read (concurrent requests share that
// read). From the watch cache once it has reached the revision, or from etcd itself
// when the cache is too far behind. A request that reads several objects (a token
// request: its service account, the bound pod, the pod's node) so waits for etcd's
// raft loop and for the cache once, not once per object: under load each wait is the
// slowest part of such a request, and every object is still as recent as the request.
type consistentReads struct {
	s   *Server
	rev int64
}

func (r *consistentReads) get(ctx context.Context, h *resourceHandler, namespace, name string) (runtime.Object, error) {
	if r.rev == 0 {
		cur, err := r.s.store.CurrentRevision(ctx)
		if err != nil {
			return nil, storageError(err, h.GroupVersionResource().GroupResource(), name)
		}
		r.rev = cur
	}
	e, err := r.s.getEntryAt(ctx, h, namespace, name, r.rev)
	if errors.Is(err, storage.ErrTooLargeRV) {
		return r.s.getObject(ctx, h, namespace, name, "")
	}
	if err != nil {
		return nil, storageError(err, h.GroupVersionResource().GroupResource(), name)
	}
	return h.presentEntry(e)
}

// getObject reads an object in the served version.
func (s *Server) getObject(ctx context.Context, h *resourceHandler, namespace, name, rv string) (runtime.Object, error) {
	gr := h.GroupVersionResource().GroupResource()
	key := h.key(namespace, name)
	var obj runtime.Object
	if rv == "" {
		obj = h.storage.New()
		if err := s.store.Get(ctx, key, obj); err != nil {
			return nil, storageError(err, gr, name)
		}
	} else {
		minRV, err := parseRV(rv)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if err := s.cache.WaitFresh(ctx, minRV, consistentReadTimeout); err != nil {
			return nil, storageError(err, gr, name)
		}
		e, _, err := s.cache.Get(h.segment, key)
		if err != nil {
			return nil, err
		}
		if e == nil {
			return nil, apierrors.NewNotFound(gr, name)
		}
		return h.presentEntry(e)
	}
	return h.present(obj)
}

// respondObject writes a single object as the client asked: the object, a Table, or
// its metadata only.
func (s *Server) respondObject(w http.ResponseWriter, r *http.Request, code int, h *resourceHandler, obj runtime.Object, format outputFormat) {
	switch format.as {
	case "Table":
		table, err := s.toTable(h, []runtime.Object{obj}, r.URL.Query(), true)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		setMetaKind(table, "Table", format.asVersion)
		s.writeObject(w, code, table, format.mediaType)
	case "PartialObjectMetadata":
		pom := toPartial(obj)
		setMetaKind(pom, "PartialObjectMetadata", format.asVersion)
		s.writeObject(w, code, pom, format.mediaType)
	case "PartialObjectMetadataList":
		s.writeError(w, r, apierrors.NewBadRequest("PartialObjectMetadataList is only returned for lists"))
	default:
		s.writeObject(w, code, obj, format.mediaType)
	}
}

func setMetaKind(obj runtime.Object, kind, version string) {
	if version == "" {
		version = "v1"
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Group: metav1.GroupName, Version: version, Kind: kind})
}

func toPartial(obj runtime.Object) *metav1.PartialObjectMetadata {
	acc := accessor(obj)
	om := metav1.ObjectMeta{
		Name: acc.GetName(), GenerateName: acc.GetGenerateName(), Namespace: acc.GetNamespace(),
		UID: acc.GetUID(), ResourceVersion: acc.GetResourceVersion(), Generation: acc.GetGeneration(),
		CreationTimestamp: acc.GetCreationTimestamp(), DeletionTimestamp: acc.GetDeletionTimestamp(),
		DeletionGracePeriodSeconds: acc.GetDeletionGracePeriodSeconds(), Labels: acc.GetLabels(),
		Annotations: acc.GetAnnotations(), OwnerReferences: acc.GetOwnerReferences(),
		Finalizers: acc.GetFinalizers(), ManagedFields: acc.GetManagedFields(),
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: om}
}

// listOptions are the parsed query parameters of a list or watch.
type listOptions struct {
	labels        labels.Selector
	fields        fields.Selector
	rv            string
	rvMatch       string
	limit         int64
	continueToken string
	// watch only
	bookmarks   bool
	sendInitial *bool
	timeout     time.Duration
}

func (s *Server) parseListOptions(q url.Values, h *resourceHandler, info *requestInfo) (*listOptions, error) {
	o := &listOptions{rv: q.Get("resourceVersion"), rvMatch: q.Get("resourceVersionMatch"), continueToken: q.Get("continue")}
	var err error
	if o.labels, err = labels.Parse(q.Get("labelSelector")); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	fs := q.Get("fieldSelector")
	if info.Name != "" {
		// A watch of one object (legacy /watch/.../name) is a watch by name.
		if fs != "" {
			fs += ","
		}
		fs += "metadata.name=" + info.Name
	}
	if o.fields, err = fields.ParseSelector(fs); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
	}
	for _, req := range o.fields.Requirements() {
		if _, ok := h.selectableFields[req.Field]; !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	if l := q.Get("limit"); l != "" {
		if o.limit, err = strconv.ParseInt(l, 10, 64); err != nil || o.limit < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", l))
		}
	}
	switch o.rvMatch {
	case "", string(metav1.ResourceVersionMatchNotOlderThan), string(metav1.ResourceVersionMatchExact):
	default:
		return nil, invalidParam("resourceVersionMatch", o.rvMatch, "must be one of NotOlderThan, Exact")
	}
	if o.rvMatch != "" && o.rv == "" && info.Verb != "watch" {
		return nil, invalidParam("resourceVersionMatch", o.rvMatch, "resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	if o.continueToken != "" && o.rv != "" && o.rv != "0" {
		return nil, invalidParam("resourceVersion", o.rv, "specifying resource version is not allowed when using continue")
	}
	if _, err := parseRV(o.rv); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	o.bookmarks = isTrue(q.Get("allowWatchBookmarks"))
	if v := q.Get("sendInitialEvents"); v != "" {
		b := isTrue(v)
		o.sendInitial = &b
	}
	if t := q.Get("timeoutSeconds"); t != "" {
		secs, err := strconv.ParseInt(t, 10, 64)
		if err != nil || secs < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", t))
		}
		o.timeout = time.Duration(secs) * time.Second
	}
	return o, nil
}

func invalidParam(name, value, detail string) error {
	return apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "",
		field.ErrorList{field.Invalid(field.NewPath(name), value, detail)})
}

// matcher returns the selector test for cache entries. Fields are those of the served
// version: a resource served from another's storage (events.k8s.io events) converts
// before it matches.
func (o *listOptions) matcher(h *resourceHandler) func(*storage.Entry) bool {
	if o.labels.Empty() && o.fields.Empty() {
		return nil
	}
	if h.converted() && !o.fields.Empty() {
		return func(e *storage.Entry) bool {
			if !o.labels.Matches(e.Labels) {
				return false
			}
			obj, err := e.Object()
			if err == nil {
				obj, err = h.FromStorage(obj)
			}
			return err == nil && o.fields.Matches(objectFields(h.Resource, obj))
		}
	}
	return func(e *storage.Entry) bool {
		return o.labels.Matches(e.Labels) && o.fields.Matches(e.Fields)
	}
}

// continueToken is the opaque continuation of a paged list, in upstream's shape.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

func encodeContinue(rv int64, startKey string) string {
	data, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: rv, StartKey: startKey})
	return base64.RawURLEncoding.EncodeToString(data)
}

func decodeContinue(token, prefix string) (int64, string, error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, "", err
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return 0, "", err
	}
	// Version -1 is the token a 410 after compaction hands out: continue at the latest
	// revision, knowingly inconsistent, as upstream's.
	if c.APIVersion != "meta.k8s.io/v1" || (c.ResourceVersion <= 0 && c.ResourceVersion != -1) || !strings.HasPrefix(c.StartKey, prefix) {
		return 0, "", fmt.Errorf("continue key is not valid")
	}
	return c.ResourceVersion, c.StartKey, nil
}

// list serves a collection. Without a limit it is served from the cache (after it has
// caught up with etcd, unless resourceVersion=0 says any version will do); pages and
// exact versions are read from etcd at a fixed revision, as upstream does.
func (s *Server) list(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	format, err := negotiate(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts, err := s.parseListOptions(r.URL.Query(), h, info)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	objs, entries, rv, cont, remaining, err := s.listFromStorage(r.Context(), h, info.Namespace, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if entries != nil {
		// Served from the cache: its entries' encodings go out as they are when the
		// client asked for the resource's own list; anything else decodes them.
		if format.as == "" && format.mediaType == mediaJSON && !h.converted() {
			s.writeJSONList(w, h, entries, rv)
			return
		}
		if format.as == "" && format.mediaType == mediaProtobuf && !h.converted() && !slices.ContainsFunc(entries, withoutProtobuf) {
			s.writeProtobufList(w, h, entries, rv)
			return
		}
		if objs, err = presentEntries(h, entries); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	listMeta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10), Continue: cont, RemainingItemCount: remaining}
	s.writeList(w, r, format, h, objs, listMeta)
}

// writeList writes objects as the format asks: a Table, a PartialObjectMetadataList,
// or the resource's own list kind.
func (s *Server) writeList(w http.ResponseWriter, r *http.Request, format outputFormat, h *resourceHandler, objs []runtime.Object, listMeta metav1.ListMeta) {
	switch format.as {
	case "Table":
		table, err := s.toTable(h, objs, r.URL.Query(), false)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		table.ListMeta = listMeta
		setMetaKind(table, "Table", format.asVersion)
		s.writeObject(w, http.StatusOK, table, format.mediaType)
	case "PartialObjectMetadataList", "PartialObjectMetadata":
		list := &metav1.PartialObjectMetadataList{ListMeta: listMeta, Items: make([]metav1.PartialObjectMetadata, 0, len(objs))}
		for _, o := range objs {
			list.Items = append(list.Items, *toPartial(o))
		}
		setMetaKind(list, "PartialObjectMetadataList", format.asVersion)
		s.writeObject(w, http.StatusOK, list, format.mediaType)
	default:
		list := h.NewList()
		if err := meta.SetList(list, objs); err != nil {
			s.writeError(w, r, err)
			return
		}
		lm, _ := meta.ListAccessor(list)
		lm.SetResourceVersion(listMeta.ResourceVersion)
		lm.SetContinue(listMeta.Continue)
		lm.SetRemainingItemCount(listMeta.RemainingItemCount)
		list.GetObjectKind().SetGroupVersionKind(h.GroupVersion.WithKind(h.Kind + "List"))
		s.writeObject(w, http.StatusOK, list, format.mediaType)
	}
}

// listObjects returns the matching objects in the served version, the list's resource
// version, and the continuation when more remain.
func (s *Server) listObjects(ctx context.Context, h *resourceHandler, namespace string, opts *listOptions) ([]runtime.Object, int64, string, *int64, error) {
	objs, entries, rv, cont, remaining, err := s.listFromStorage(ctx, h, namespace, opts)
	if err == nil && entries != nil {
		objs, err = presentEntries(h, entries)
	}
	return objs, rv, cont, remaining, err
}

// presentEntries is the cache entries' objects in the served version.
func presentEntries(h *resourceHandler, entries []*storage.Entry) ([]runtime.Object, error) {
	out := make([]runtime.Object, 0, len(entries))
	for _, e := range entries {
		obj, err := h.presentEntry(e)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

func withoutProtobuf(e *storage.Entry) bool { return !e.HasProtobuf() }

// listFromStorage reads a list either from the cache, returning its entries (and no
// objects: their cached encodings may serve the list without decoding any), or from
// etcd, returning the objects in the served version.
func (s *Server) listFromStorage(ctx context.Context, h *resourceHandler, namespace string, opts *listOptions) ([]runtime.Object, []*storage.Entry, int64, string, *int64, error) {
	gr := h.GroupVersionResource().GroupResource()
	prefix := h.listPrefix(namespace)
	requestedRV, _ := parseRV(opts.rv)
	fromEtcd := opts.continueToken != "" || (opts.limit > 0 && opts.rv != "0") || opts.rvMatch == string(metav1.ResourceVersionMatchExact)
	if !fromEtcd {
		minRV := requestedRV
		if opts.rv == "" {
			cur, err := s.store.CurrentRevision(ctx)
			if err != nil {
				return nil, nil, 0, "", nil, err
			}
			minRV = cur
		}
		if err := s.cache.WaitFresh(ctx, minRV, consistentReadTimeout); err != nil {
			return nil, nil, 0, "", nil, storageError(err, gr, "")
		}
		entries, rv, err := s.cache.List(h.segment, prefix, opts.matcher(h))
		if err != nil {
			return nil, nil, 0, "", nil, err
		}
		if entries == nil {
			entries = []*storage.Entry{} // served from the cache, and empty
		}
		return nil, entries, rv, "", nil, nil
	}
	start, end := prefix, prefix[:len(prefix)-1]+"0" // '0' follows '/'
	var rev int64
	var startKeyOf string // the key a continue token resumes after
	if opts.continueToken != "" {
		crv, startKey, err := decodeContinue(opts.continueToken, prefix)
		if err != nil {
			return nil, nil, 0, "", nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		rev, start, startKeyOf = max(crv, 0), startKey+"\x00", startKey
	} else if opts.rvMatch == string(metav1.ResourceVersionMatchExact) {
		rev = requestedRV
	} else if requestedRV > 0 {
		// NotOlderThan: the latest state is at least that new.
		rev = 0
	}
	match := opts.matcher(h)
	keep := func(obj runtime.Object) bool {
		if match == nil {
			return true
		}
		acc := accessor(obj)
		return match(storage.DecodedEntry(acc.GetName(), obj, labels.Set(acc.GetLabels()), objectFields(h.storage, obj)))
	}
	objs, readRev, lastKey, remaining, err := s.store.ListPage(ctx, start, end, rev, opts.limit, h.storage.New, keep)
	if err != nil {
		if errors.Is(err, storage.ErrExpired) && opts.continueToken != "" {
			// The token's revision was compacted: hand out one that continues from the same
			// key at the latest revision, which the client may use knowing the list will be
			// inconsistent.
			expired := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
			expired.ErrStatus.ListMeta.Continue = encodeContinue(-1, startKeyOf)
			return nil, nil, 0, "", nil, expired
		}
		return nil, nil, 0, "", nil, storageError(err, gr, "")
	}
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		p, err := h.present(o)
		if err != nil {
			return nil, nil, 0, "", nil, err
		}
		out = append(out, p)
	}
	cont := ""
	var remainingCount *int64
	if lastKey != "" {
		cont = encodeContinue(readRev, lastKey)
		if match == nil {
			// Only without a selector is the count of what remains known, as upstream.
			remainingCount = &remaining
		}
	}
	return out, nil, readRev, cont, remainingCount, nil
}

// decodeBody decodes a create or update body and applies fieldValidation: Strict
// refuses unknown and duplicate fields, Warn (the default) reports them in Warning
// headers, Ignore drops them.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, h *resourceHandler, data []byte, mediaType string) (runtime.Object, error) {
	obj := h.New()
	strictErr, err := s.codecs.decodeInto(mediaType, data, h.GroupVersionKind(), obj)
	if err != nil {
		return nil, err
	}
	strictErr = pruneUnknown(h, obj, strictErr)
	if err := applyFieldValidation(w, r, strictErr); err != nil {
		return nil, err
	}
	return obj, nil
}

func applyFieldValidation(w http.ResponseWriter, r *http.Request, strictErr error) error {
	if strictErr == nil {
		return nil
	}
	var problems []string
	if se, ok := strictErr.(interface{ Errors() []error }); ok {
		for _, e := range se.Errors() {
			problems = append(problems, e.Error())
		}
	} else {
		problems = []string{strictErr.Error()}
	}
	switch r.URL.Query().Get("fieldValidation") {
	case "Strict":
		return apierrors.NewBadRequest("strict decoding error: " + strings.Join(problems, ", "))
	case "Ignore":
		return nil
	case "", "Warn":
		for _, p := range problems {
			if w == nil {
				break
			}
			w.Header().Add("Warning", fmt.Sprintf("299 - %q", p))
		}
		return nil
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of Ignore, Warn or Strict, got %q", r.URL.Query().Get("fieldValidation")))
	}
}

// readWriteRequest does what every write starts with: check dryRun, choose the
// response format, and read the body.
func readWriteRequest(r *http.Request) (outputFormat, []byte, error) {
	if err := validateDryRun(r); err != nil {
		return outputFormat{}, nil, err
	}
	format, err := negotiate(r, false)
	if err != nil {
		return outputFormat{}, nil, err
	}
	data, err := readBody(r)
	return format, data, err
}

func isDryRun(r *http.Request) bool { return len(r.URL.Query()["dryRun"]) > 0 }

func validateDryRun(r *http.Request) error {
	for _, v := range r.URL.Query()["dryRun"] {
		if v != metav1.DryRunAll {
			return apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q, supported values: %q", v, metav1.DryRunAll))
		}
	}
	return nil
}

func nameFunc(r *registry.Resource) apivalidation.ValidateNameFunc {
	if r.ValidateName != nil {
		return r.ValidateName
	}
	return validname.NameIsDNSSubdomain
}

// validateCreate runs the generic metadata checks and the resource's own.
func (s *Server) validateCreate(ctx context.Context, h *resourceHandler, obj runtime.Object) error {
	acc := accessor(obj)
	errs := validname.ValidateObjectMetaAccessor(acc, h.Namespaced, nameFunc(h.Resource), field.NewPath("metadata"))
	if h.Strategy != nil {
		errs = append(errs, h.Strategy.Validate(ctx, obj)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(h.GroupVersionKind().GroupKind(), acc.GetName(), errs)
	}
	return nil
}

// validateUpdate runs the generic metadata checks and, withStrategy, the resource's
// own: only its status checks when statusOnly (a status write whose spec is the stored
// one, see registry.StatusStrategy).
func (s *Server) validateUpdate(ctx context.Context, h *resourceHandler, obj, old runtime.Object, withStrategy, statusOnly bool) error {
	acc, oldAcc := accessor(obj), accessor(old)
	errs := validname.ValidateObjectMetaAccessor(acc, h.Namespaced, nameFunc(h.Resource), field.NewPath("metadata"))
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(acc, oldAcc, field.NewPath("metadata"))...)
	if ss, ok := h.Strategy.(registry.StatusStrategy); ok && withStrategy && statusOnly {
		errs = append(errs, ss.ValidateStatusUpdate(ctx, obj, old)...)
	} else if h.Strategy != nil && withStrategy {
		errs = append(errs, h.Strategy.ValidateUpdate(ctx, obj, old)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(h.GroupVersionKind().GroupKind(), acc.GetName(), errs)
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	ctx := r.Context()
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	owner, err := writeOwner(r, "create", "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, err := s.decodeBody(w, r, h, data, requestMediaType(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	created, entry, err := s.createObjectEntry(ctx, h, info.Namespace, obj, isDryRun(r), owner)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The stored bytes, as the cache will keep them, are the protobuf response.
	if entry != nil && format.as == "" && format.mediaType == mediaProtobuf && !h.converted() &&
		s.writeEntryCode(w, entry, format.mediaType, http.StatusCreated) {
		return
	}
	s.respondObject(w, r, http.StatusCreated, h, created, format)
}

// createObject runs the create chain for a decoded object and stores it; owner (nil
// for none) is recorded in its managedFields.
func (s *Server) createObject(ctx context.Context, h *resourceHandler, namespace string, obj runtime.Object, dryRun bool, owner *fieldOwner) (runtime.Object, error) {
	created, _, err := s.createObjectEntry(ctx, h, namespace, obj, dryRun, owner)
	return created, err
}

// createObjectEntry is createObject that also returns the watch cache's entry of the
// stored object, when storage made one (see storage.Store.CreateEntry).
func (s *Server) createObjectEntry(ctx context.Context, h *resourceHandler, namespace string, obj runtime.Object, dryRun bool, owner *fieldOwner) (runtime.Object, *storage.Entry, error) {
	acc := accessor(obj)
	gr := h.GroupVersionResource().GroupResource()
	if h.Namespaced {
		if acc.GetNamespace() == "" {
			acc.SetNamespace(namespace)
		} else if acc.GetNamespace() != namespace {
			return nil, nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		acc.SetNamespace("")
	}
	if acc.GetResourceVersion() != "" {
		return nil, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if h.Strategy != nil {
		h.Strategy.Default(obj)
	}
	obj = s.trackFields(h, owner, nil, obj)
	// Mutating admission sees the object as the client sent it, defaulted; then the
	// server fills in what it owns, validates, and lets validating admission decide.
	attrs := s.admissionAttributes(ctx, admission.Create, h, "", acc.GetNamespace(), acc.GetName(), obj, nil, dryRun, &metav1.CreateOptions{DryRun: dryRunList(dryRun)})
	if err := s.mutate(ctx, attrs); err != nil {
		return nil, nil, err
	}
	pruneMutated(h, attrs.Object)
	if attrs.Object != obj {
		obj = attrs.Object
		if h.Strategy != nil {
			h.Strategy.Default(obj)
		}
	}
	acc = accessor(obj)
	generated := acc.GetName() == "" && acc.GetGenerateName() != ""
	prepareCreateMeta(acc, obj, time.Now())
	if h.Strategy != nil {
		h.Strategy.PrepareForCreate(ctx, obj)
	}
	if err := s.validateCreate(ctx, h, obj); err != nil {
		return nil, nil, err
	}
	attrs.Name, attrs.Object = acc.GetName(), obj
	if err := s.validateAdmission(ctx, attrs); err != nil {
		return nil, nil, err
	}
	release, err := s.beforeCreate(ctx, h, obj, dryRun)
	if err != nil {
		return nil, nil, err
	}
	if dryRun {
		release()
		return obj, nil, nil
	}
	stored, err := h.toStorage(obj)
	if err != nil {
		release()
		return nil, nil, err
	}
	var entry *storage.Entry
	for attempt := 0; ; attempt++ {
		entry, err = s.store.CreateEntry(ctx, h.key(acc.GetNamespace(), acc.GetName()), stored)
		if errors.Is(err, storage.ErrAlreadyExists) && generated && attempt < 5 {
			acc.SetName(generateName(acc.GetGenerateName()))
			if sacc, e := meta.Accessor(stored); e == nil && stored != obj {
				sacc.SetName(acc.GetName())
			}
			continue
		}
		break
	}
	if err != nil {
		release()
		return nil, nil, storageError(err, gr, acc.GetName())
	}
	created, err := h.present(stored)
	return created, entry, err
}

// update replaces an object (or, with status, only its status).
func (s *Server) update(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler, mode updateMode) {
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	owner, err := writeOwner(r, "update", mode.subresource())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	obj, err := s.decodeBody(w, r, h, data, requestMediaType(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	acc := accessor(obj)
	if acc.GetName() != info.Name {
		s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", acc.GetName(), info.Name)))
		return
	}
	if h.Namespaced {
		if acc.GetNamespace() == "" {
			acc.SetNamespace(info.Namespace)
		} else if acc.GetNamespace() != info.Namespace {
			s.writeError(w, r, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request"))
			return
		}
	}
	if h.Strategy != nil && mode == updateMain {
		h.Strategy.Default(obj)
	}
	updated, err := s.updateObject(r.Context(), h, info.Namespace, info.Name, mode, isDryRun(r), owner, func(current runtime.Object) (runtime.Object, error) {
		return obj.DeepCopyObject(), nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.respondObject(w, r, http.StatusOK, h, updated, format)
}

// updateObject runs the update chain: newObject computes the desired object from the
// current one (in the served version); the server keeps system fields, keeps status or
// spec apart, validates, and writes if the object did not change meanwhile.
// updateMode says which part of an object an update may change.
type updateMode int

const (
	updateMain      updateMode = iota // everything but the status (of resources with one)
	updateStatus                      // only the status
	updateAll                         // both, the resource's own update rules skipped (pods/binding, the CRD finalizer's removal)
	updateFinalize                    // as updateAll, through a namespace's finalize subresource
	updateEphemeral                   // only a pod's spec.ephemeralContainers
	updateApproval                    // only the status, through a CSR's approval subresource
	updateResize                      // only a pod's container resources (pods/resize)
)

// admissionSubresource names the subresource of a mode as admission sees it.
func (m updateMode) admissionSubresource() string {
	switch m {
	case updateStatus:
		return "status"
	case updateApproval:
		return "approval"
	case updateFinalize:
		return "finalize"
	case updateEphemeral:
		return "ephemeralcontainers"
	case updateResize:
		return "resize"
	}
	return ""
}

// bypassesUpdateRules reports whether a mode writes fields a client's update may not
// change, skipping the resource's own update rules.
func (m updateMode) bypassesUpdateRules() bool { return m == updateAll || m == updateFinalize }

func dryRunList(dryRun bool) []string {
	if dryRun {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// allowsUnconditionalUpdate reports whether an update without a resourceVersion is
// accepted: for most resources, not for leases, whose holders must not overwrite each
// other.
func allowsUnconditionalUpdate(gr schema.GroupResource) bool {
	return gr != schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
}

// subresource names the endpoint of a mode, as managedFields record it.
func (m updateMode) subresource() string {
	switch m {
	case updateStatus:
		return "status"
	case updateApproval:
		return "approval"
	case updateEphemeral:
		return "ephemeralcontainers"
	case updateResize:
		return "resize"
	}
	return ""
}

// updateObject records owner (nil for none) in the object's managedFields.
func (s *Server) updateObject(ctx context.Context, h *resourceHandler, namespace, name string, mode updateMode, dryRun bool, owner *fieldOwner, newObject func(current runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	gr := h.GroupVersionResource().GroupResource()
	var result runtime.Object
	var deleted bool
	// releaseAttempt frees what an attempt allocated if the write does not happen (a
	// retry after a conflict allocates again).
	releaseAttempt := func() {}
	update := func(stored runtime.Object) (runtime.Object, error) {
		current, err := h.present(stored)
		if err != nil {
			return nil, err
		}
		obj, err := newObject(current.DeepCopyObject())
		if err != nil {
			return nil, err
		}
		acc, curAcc := accessor(obj), accessor(current)
		if rv := acc.GetResourceVersion(); rv != "" && rv != curAcc.GetResourceVersion() {
			return nil, apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		if acc.GetResourceVersion() == "" && allowsUnconditionalUpdate(gr) {
			// An update without a resourceVersion applies to whatever is stored, as
			// upstream's store allows for most resources.
			acc.SetResourceVersion(curAcc.GetResourceVersion())
		}
		if uid := acc.GetUID(); uid != "" && uid != curAcc.GetUID() {
			return nil, apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, curAcc.GetUID()))
		}
		if mode == updateStatus || mode == updateApproval {
			// Only the status changes through the status (or approval) subresource,
			// and the metadata upstream's status strategies keep from the request too.
			full := current.DeepCopyObject()
			copyField(full, obj, "Status")
			keepStatusMetadata(gr, full, obj)
			accessor(full).SetResourceVersion(acc.GetResourceVersion())
			if owner != nil && owner.applied {
				accessor(full).SetManagedFields(acc.GetManagedFields())
			}
			obj, acc = full, accessor(full)
		} else if mode == updateEphemeral {
			// Only the ephemeral containers change through pods/ephemeralcontainers.
			full := current.DeepCopyObject().(*corev1.Pod)
			full.Spec.EphemeralContainers = obj.(*corev1.Pod).Spec.EphemeralContainers
			full.SetResourceVersion(acc.GetResourceVersion())
			if owner != nil && owner.applied {
				full.SetManagedFields(acc.GetManagedFields())
			}
			obj, acc = full, accessor(full)
		} else if mode == updateResize {
			// Only the containers' resources change through pods/resize.
			full := current.DeepCopyObject().(*corev1.Pod)
			core.ApplyResize(full, obj.(*corev1.Pod))
			full.SetResourceVersion(acc.GetResourceVersion())
			if owner != nil && owner.applied {
				full.SetManagedFields(acc.GetManagedFields())
			}
			obj, acc = full, accessor(full)
		} else if h.HasStatus && mode == updateMain {
			copyField(obj, current, "Status")
		}
		obj = s.trackFields(h, owner, current, obj)
		attrs := s.admissionAttributes(ctx, admission.Update, h, mode.admissionSubresource(), namespace, name, obj, current, dryRun, &metav1.UpdateOptions{DryRun: dryRunList(dryRun)})
		if err := s.mutate(ctx, attrs); err != nil {
			return nil, err
		}
		pruneMutated(h, attrs.Object)
		obj = attrs.Object
		acc = accessor(obj)
		statusOnly := false
		if _, ok := h.Strategy.(registry.StatusStrategy); ok && mode == updateStatus && hasSpec(obj) {
			// Upstream's status strategy puts the stored spec back after mutating
			// admission; the spec is then the stored one and needs no validation.
			copyField(obj, current, "Spec")
			statusOnly = true
		}
		prepareUpdateMeta(acc, curAcc, obj, current, mode != updateStatus && mode != updateApproval && !mode.bypassesUpdateRules())
		// A binding writes the fields a client may never change (spec.nodeName) and
		// skips the resource's own update rules, as upstream's binding does.
		if h.Strategy != nil && !mode.bypassesUpdateRules() {
			h.Strategy.PrepareForUpdate(ctx, obj, current)
		}
		if err := s.validateUpdate(ctx, h, obj, current, !mode.bypassesUpdateRules() && mode != updateEphemeral && mode != updateResize, statusOnly); err != nil {
			return nil, err
		}
		if err := validateEphemeralUpdate(mode, obj, current); err != nil {
			return nil, err
		}
		if err := validateResizeUpdate(mode, obj, current); err != nil {
			return nil, err
		}
		attrs.Object = obj
		if err := s.validateAdmission(ctx, attrs); err != nil {
			return nil, err
		}
		if svc, ok := obj.(*corev1.Service); ok && s.services != nil && !dryRun {
			// A changed type may need a cluster IP or node ports it did not have.
			releaseAttempt()
			rel, err := s.services.allocate(ctx, svc, false)
			if err != nil {
				return nil, err
			}
			releaseAttempt = rel
		}
		result = obj
		// The last finalizer gone from an object being deleted: it goes now.
		if acc.GetDeletionTimestamp() != nil && len(acc.GetFinalizers()) == 0 && finishedGracePeriod(acc) && !blockedByNamespaceFinalizers(h, obj) {
			deleted = true
			if dryRun {
				return nil, errDryRunDone
			}
			return nil, nil
		}
		if dryRun {
			return nil, errDryRunDone
		}
		acc.SetResourceVersion("")
		return h.toStorage(obj)
	}
	var before runtime.Object
	wrapped := func(stored runtime.Object) (runtime.Object, error) {
		before = stored
		return update(stored)
	}
	stored, _, err := s.store.GuaranteedUpdate(ctx, h.key(namespace, name), h.storage.New, wrapped)
	if errors.Is(err, errDryRunDone) {
		releaseAttempt()
		return result, nil
	}
	if err != nil {
		releaseAttempt()
		return nil, storageError(err, gr, name)
	}
	if deleted {
		s.afterDelete(ctx, h, result)
	} else if oldSvc, ok := before.(*corev1.Service); ok && s.services != nil {
		s.services.releaseUnused(context.WithoutCancel(ctx), oldSvc, stored.(*corev1.Service))
	}
	return h.present(stored)
}

// errDryRunDone stops a dry-run update after every check, before the write.
var errDryRunDone = errors.New("dry run")

// finishedGracePeriod: an object waits for its grace period (pods, for the kubelet) to
// be finished with before it can go.
func finishedGracePeriod(acc metav1.Object) bool {
	g := acc.GetDeletionGracePeriodSeconds()
	return g == nil || *g == 0
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler, mode updateMode) {
	patchType := requestMediaType(r)
	if !supportedPatchType(patchType) {
		s.writeError(w, r, unsupportedPatchType())
		return
	}
	if isApply(patchType) {
		s.serverSideApply(w, r, info, h, mode)
		return
	}
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	owner, err := writeOwner(r, "patch", mode.subresource())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	updated, err := s.updateObject(r.Context(), h, info.Namespace, info.Name, mode, isDryRun(r), owner, func(current runtime.Object) (runtime.Object, error) {
		return s.applyPatch(w, r, h, current, patchType, data)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.respondObject(w, r, http.StatusOK, h, updated, format)
}
