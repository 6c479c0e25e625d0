package apiserver

// Custom resources are served by the same generic REST handler as built-in ones: a
// CustomResourceDefinition becomes registry Resources (registry/customresource, which
// knows nothing of the server), and this file installs and removes them while the
// server runs. The built-in handlers are fixed at New and read without a lock; custom
// handlers live apart in customAPIs, behind a lock, and are looked up only when no
// built-in resource matches. One level-triggered loop (runCRDs) follows the CRDs in
// the watch cache and, for each, accepts its names (or reports the conflict),
// establishes it, installs its handlers, cache resource, field managers, discovery and
// OpenAPI, and on deletion removes every custom resource before letting the CRD go.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/registry"
	"mizzen/internal/registry/apiextensions"
	"mizzen/internal/registry/customresource"
	"mizzen/internal/storage"
)

var crdGVR = apiextv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// customAPIs holds the handlers of the established CRDs' resources.
type customAPIs struct {
	mu        sync.RWMutex
	handlers  map[schema.GroupVersionResource]*resourceHandler
	installed map[string]*installedCRD // by CRD name
}

// installedCRD is what one CRD has installed.
type installedCRD struct {
	// fingerprint is the CRD's spec and accepted names when installed: a change
	// reinstalls.
	fingerprint string
	segment     string
	gvrs        []schema.GroupVersionResource
	terminating bool
}

func newCustomAPIs() *customAPIs {
	return &customAPIs{handlers: map[schema.GroupVersionResource]*resourceHandler{}, installed: map[string]*installedCRD{}}
}

// handler returns the custom resource handler of gvr, nil if none is installed.
func (c *customAPIs) handler(gvr schema.GroupVersionResource) *resourceHandler {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.handlers[gvr]
}

// all returns every installed handler.
func (c *customAPIs) all() []*resourceHandler {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*resourceHandler, 0, len(c.handlers))
	for _, h := range c.handlers {
		out = append(out, h)
	}
	return out
}

// terminating says whether the CRD serving h is being deleted: no new objects then.
func (c *customAPIs) terminating(h *resourceHandler) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, in := range c.installed {
		if in.segment == h.segment {
			return in.terminating
		}
	}
	return false
}

// serveCustom serves a request for a custom resource.
func (s *Server) serveCustom(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
	// The scale subresource is autoscaling/v1's Scale, a built-in type with a protobuf form.
	if info.Subresource != "scale" && !acceptsJSON(r) {
		s.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "", "only the following media types are accepted: application/json, application/yaml", 0, false))
		return
	}
	if info.Verb == "create" && info.Subresource == "" && s.custom.terminating(h) {
		err := apierrors.NewMethodNotSupported(h.GroupVersionResource().GroupResource(), "create")
		err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
		s.writeError(w, r, err)
		return
	}
	if info.Verb == "patch" && info.Subresource != "scale" && requestMediaType(r) == "application/strategic-merge-patch+json" {
		s.writeError(w, r, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
			"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml", 0, false))
		return
	}
	s.serveResource(w, r, info, h)
}

// acceptsJSON removes protobuf from the Accept header of a request for custom
// resources, which have no protobuf form (except as metadata or a table, which are
// typed); it reports false when nothing else was acceptable.
func acceptsJSON(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return true
	}
	var kept []string
	for _, clause := range strings.Split(accept, ",") {
		c := strings.TrimSpace(clause)
		if strings.HasPrefix(c, mediaProtobuf) && !strings.Contains(c, "as=") {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 {
		return false
	}
	r.Header.Set("Accept", strings.Join(kept, ","))
	return true
}

// runCRDs keeps the served custom resources in line with the stored CRDs until ctx
// ends: on every change of a CRD, and every few seconds (so a cleanup that failed is
// tried again).
func (s *Server) runCRDs(ctx context.Context) {
	select {
	case <-s.cache.Ready():
	case <-ctx.Done():
		return
	}
	h := s.handlers[crdGVR]
	if h == nil {
		return
	}
	for ctx.Err() == nil {
		w, err := s.cache.Watch(h.segment, storage.WatchOptions{FromRV: s.cache.Revision()})
		if err != nil {
			s.log.Warn("crds: watching", "err", err)
			time.Sleep(time.Second)
			continue
		}
		s.reconcileCRDs(ctx)
		events := make(chan struct{}, 1)
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			for {
				if _, err := w.Next(wctx); err != nil {
					close(events)
					return
				}
				select {
				case events <- struct{}{}:
				default:
				}
			}
		}()
		tick := time.NewTicker(5 * time.Second)
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case _, ok := <-events:
				if !ok {
					break loop
				}
				s.reconcileCRDs(ctx)
			case <-tick.C:
				s.reconcileCRDs(ctx)
			}
		}
		tick.Stop()
		cancel()
		s.cache.StopWatch(w)
	}
}

// reconcileCRDs does one pass over every CRD.
func (s *Server) reconcileCRDs(ctx context.Context) {
	h := s.handlers[crdGVR]
	entries, _, err := s.cache.List(h.segment, h.listPrefix(""), nil)
	if err != nil {
		return
	}
	crds := make([]*apiextv1.CustomResourceDefinition, 0, len(entries))
	for _, e := range entries {
		obj, err := e.Object()
		if err != nil {
			s.log.Error("reading a CustomResourceDefinition from the cache", "key", e.Key, "err", err)
			continue
		}
		crds = append(crds, obj.(*apiextv1.CustomResourceDefinition))
	}
	sort.Slice(crds, func(i, j int) bool {
		// Older CRDs keep their names when a newer one asks for the same.
		ti, tj := crds[i].CreationTimestamp, crds[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return crds[i].Name < crds[j].Name
	})
	changed := false
	seen := map[string]bool{}
	for i, crd := range crds {
		seen[crd.Name] = true
		desired := s.crdStatus(crd, crds)
		if crd.DeletionTimestamp != nil {
			desired = s.cleanupCRD(ctx, crd, desired)
		}
		if statusChanged(crd, desired) {
			if updated, err := s.writeCRDStatus(ctx, crd, desired); err == nil {
				// The CRDs after this one see the names it now holds.
				crd, crds[i] = updated, updated
			} else if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				s.log.Warn("crds: writing status", "crd", crd.Name, "err", err)
			}
		}
		if isEstablished(crd) {
			if s.installCRD(crd) {
				changed = true
			}
		}
	}
	s.custom.mu.RLock()
	var gone []string
	for name := range s.custom.installed {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	s.custom.mu.RUnlock()
	for _, name := range gone {
		s.uninstallCRD(name)
		changed = true
	}
	if changed {
		s.publishAPIs()
	}
	s.syncCRDAPIServices(ctx)
}

func condition(crd *apiextv1.CustomResourceDefinition, t apiextv1.CustomResourceDefinitionConditionType) *apiextv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

func isEstablished(crd *apiextv1.CustomResourceDefinition) bool {
	c := condition(crd, apiextv1.Established)
	return c != nil && c.Status == apiextv1.ConditionTrue
}

// crdStatus is the status a CRD should have: its names accepted unless another CRD of
// the group (or a built-in resource) holds them, and Established once they are.
func (s *Server) crdStatus(crd *apiextv1.CustomResourceDefinition, all []*apiextv1.CustomResourceDefinition) apiextv1.CustomResourceDefinitionStatus {
	status := *crd.Status.DeepCopy()
	accepted, reason, message := s.acceptNames(crd, all)
	status.AcceptedNames = accepted
	names := apiextv1.ConditionTrue
	if reason != "NoConflicts" {
		names = apiextv1.ConditionFalse
	}
	setCondition(&status, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.NamesAccepted, Status: names, Reason: reason, Message: message})
	if names == apiextv1.ConditionTrue && crd.DeletionTimestamp == nil {
		setCondition(&status, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Established, Status: apiextv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"})
	} else if c := condition(crd, apiextv1.Established); c == nil || c.Status != apiextv1.ConditionTrue {
		setCondition(&status, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Established, Status: apiextv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"})
	}
	return status
}

// acceptNames works out the names a CRD may use, as upstream's naming controller
// does: each requested name is accepted unless another CRD of the group has accepted
// it already (a name the CRD holds itself stays its own); the condition reports the
// last conflict found.
func (s *Server) acceptNames(crd *apiextv1.CustomResourceDefinition, all []*apiextv1.CustomResourceDefinition) (apiextv1.CustomResourceDefinitionNames, string, string) {
	resources, kinds := sets.New[string](), sets.New[string]()
	for _, other := range all {
		if other.Name == crd.Name || other.Spec.Group != crd.Spec.Group {
			continue
		}
		an := other.Status.AcceptedNames
		resources.Insert(an.Plural, an.Singular)
		resources.Insert(an.ShortNames...)
		kinds.Insert(an.Kind, an.ListKind)
	}
	requested, accepted := crd.Spec.Names, crd.Status.AcceptedNames
	names := accepted
	reason, message := "NoConflicts", "no conflicts found"
	fresh := func(name, current string, taken sets.Set[string]) error {
		if name == current || !taken.Has(name) {
			return nil
		}
		return fmt.Errorf("%q is already in use", name)
	}
	conflict := func(r string, err error) {
		reason, message = r, err.Error()
	}
	if err := fresh(requested.Plural, accepted.Plural, resources); err != nil {
		conflict("PluralConflict", err)
	} else {
		names.Plural = requested.Plural
	}
	if err := fresh(requested.Singular, accepted.Singular, resources); err != nil {
		conflict("SingularConflict", err)
	} else {
		names.Singular = requested.Singular
	}
	var shortErrs []error
	for _, sn := range requested.ShortNames {
		if slices.Contains(accepted.ShortNames, sn) {
			continue
		}
		if err := fresh(sn, "", resources); err != nil {
			shortErrs = append(shortErrs, err)
		}
	}
	if err := utilerrors.NewAggregate(shortErrs); err != nil {
		conflict("ShortNamesConflict", err)
	} else {
		names.ShortNames = requested.ShortNames
	}
	if err := fresh(requested.Kind, accepted.Kind, kinds); err != nil {
		conflict("KindConflict", err)
	} else {
		names.Kind = requested.Kind
	}
	if err := fresh(requested.ListKind, accepted.ListKind, kinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		names.ListKind = requested.ListKind
	}
	names.Categories = requested.Categories
	return names, reason, message
}

func setCondition(status *apiextv1.CustomResourceDefinitionStatus, c apiextv1.CustomResourceDefinitionCondition) {
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = metav1.NewTime(time.Now())
		}
		*old = c
		return
	}
	c.LastTransitionTime = metav1.NewTime(time.Now())
	status.Conditions = append(status.Conditions, c)
}

func statusChanged(crd *apiextv1.CustomResourceDefinition, desired apiextv1.CustomResourceDefinitionStatus) bool {
	a, _ := json.Marshal(crd.Status)
	b, _ := json.Marshal(desired)
	return string(a) != string(b)
}

// writeCRDStatus stores a CRD's new status (conditions and accepted names only, so a
// concurrent change of storedVersions is kept).
func (s *Server) writeCRDStatus(ctx context.Context, crd *apiextv1.CustomResourceDefinition, desired apiextv1.CustomResourceDefinitionStatus) (*apiextv1.CustomResourceDefinition, error) {
	h := s.handlers[crdGVR]
	obj, err := s.updateObject(ctx, h, "", crd.Name, updateStatus, false, nil, func(current runtime.Object) (runtime.Object, error) {
		cur := current.(*apiextv1.CustomResourceDefinition)
		if cur.UID != crd.UID {
			return nil, apierrors.NewConflict(crdGVR.GroupResource(), crd.Name, fmt.Errorf("the CRD was replaced"))
		}
		cur.Status.Conditions = desired.Conditions
		cur.Status.AcceptedNames = desired.AcceptedNames
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	return obj.(*apiextv1.CustomResourceDefinition), nil
}

// cleanupCRD deletes the custom resources of a CRD being deleted, then removes its
// cleanup finalizer; it returns the status to record meanwhile (Terminating).
func (s *Server) cleanupCRD(ctx context.Context, crd *apiextv1.CustomResourceDefinition, status apiextv1.CustomResourceDefinitionStatus) apiextv1.CustomResourceDefinitionStatus {
	setCondition(&status, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue, Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress"})
	hasFinalizer := false
	for _, f := range crd.Finalizers {
		if f == apiextensions.Finalizer {
			hasFinalizer = true
		}
	}
	if !hasFinalizer {
		return status
	}
	s.custom.mu.Lock()
	if in := s.custom.installed[crd.Name]; in != nil {
		in.terminating = true
	}
	s.custom.mu.Unlock()
	h := s.storageHandler(crd)
	if h == nil {
		return status
	}
	remaining, err := s.deleteAllCustom(ctx, h)
	if err != nil {
		setCondition(&status, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue, Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not list instances: %v", err)})
		return status
	}
	if remaining > 0 {
		setCondition(&status, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue, Reason: "InstanceDeletionCheck", Message: fmt.Sprintf("could not confirm zero CustomResources remaining: %d remaining", remaining)})
		return status
	}
	setCondition(&status, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"})
	// The API goes first, then the finalizer, which lets the CRD go.
	s.uninstallCRD(crd.Name)
	s.publishAPIs()
	_, err = s.updateObject(ctx, s.handlers[crdGVR], "", crd.Name, updateAll, false, nil, func(current runtime.Object) (runtime.Object, error) {
		cur := current.(*apiextv1.CustomResourceDefinition)
		var kept []string
		for _, f := range cur.Finalizers {
			if f != apiextensions.Finalizer {
				kept = append(kept, f)
			}
		}
		cur.Finalizers = kept
		cur.Status = status
		return cur, nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		s.log.Warn("crds: removing the cleanup finalizer", "crd", crd.Name, "err", err)
	}
	return status
}

// storageHandler is a handler of the resource that stores a CRD's objects, whether
// or not it is installed (a CRD deleted before it was established has none).
func (s *Server) storageHandler(crd *apiextv1.CustomResourceDefinition) *resourceHandler {
	rs, err := customresource.ResourcesWithConverter(crd, s.converterFor(crd))
	if err != nil || len(rs) == 0 {
		return nil
	}
	h := newCustomHandler(rs[0], rs[0])
	return h
}

// deleteAllCustom deletes every object of a custom resource, as a client's delete
// would (finalizers are honoured), and returns how many remain.
func (s *Server) deleteAllCustom(ctx context.Context, h *resourceHandler) (int, error) {
	prefix := h.listPrefix("")
	objs, _, _, _, err := s.store.ListPage(ctx, prefix, prefix[:len(prefix)-1]+"0", 0, 0, h.storage.New, nil)
	if err != nil {
		return 0, err
	}
	remaining := 0
	background := metav1.DeletePropagationBackground
	for _, obj := range objs {
		acc := accessor(obj)
		_, gone, err := s.deleteObject(ctx, h, acc.GetNamespace(), acc.GetName(), &metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("crds: deleting a custom resource", "key", h.key(acc.GetNamespace(), acc.GetName()), "err", err)
		}
		if err == nil && !gone {
			remaining++
		}
	}
	return remaining, nil
}

// newCustomHandler makes the handler of a custom resource version; storage is the
// storage version's resource.
func newCustomHandler(r, storageRes *registry.Resource) *resourceHandler {
	h := &resourceHandler{Resource: r, storage: storageRes, segment: segmentFor(storageRes.GroupVersionResource().GroupResource())}
	h.selectableFields = fields.Set{"metadata.name": ""}
	if r.Namespaced {
		h.selectableFields["metadata.namespace"] = ""
	}
	return h
}

func crdFingerprint(crd *apiextv1.CustomResourceDefinition) string {
	data, _ := json.Marshal(struct {
		Spec  apiextv1.CustomResourceDefinitionSpec
		Names apiextv1.CustomResourceDefinitionNames
	}{crd.Spec, crd.Status.AcceptedNames})
	return string(data)
}

// installCRD installs (or reinstalls, after a change) a CRD's resources; it reports
// whether anything changed.
func (s *Server) installCRD(crd *apiextv1.CustomResourceDefinition) bool {
	fp := crdFingerprint(crd)
	s.custom.mu.RLock()
	in := s.custom.installed[crd.Name]
	s.custom.mu.RUnlock()
	if in != nil && in.fingerprint == fp {
		return false
	}
	rs, err := customresource.ResourcesWithConverter(crd, s.converterFor(crd))
	if err != nil || len(rs) == 0 {
		if err != nil {
			s.log.Warn("crds: building resources", "crd", crd.Name, "err", err)
		}
		return false
	}
	storageRes := rs[0]
	handlers := make([]*resourceHandler, 0, len(rs))
	for _, r := range rs {
		h := newCustomHandler(r, storageRes)
		for _, sf := range selectablePaths(crd, r.GroupVersion.Version) {
			h.selectableFields[sf] = ""
		}
		handlers = append(handlers, h)
	}
	seg := handlers[0].segment
	if err := s.cache.AddResource(context.Background(), storage.ResourceConfig{
		Segment: seg, Kind: storageRes.GroupVersionKind(), New: storageRes.New,
		Fields: func(obj runtime.Object) storage.Pairs { return objectFields(storageRes, obj) },
	}); err != nil {
		s.log.Warn("crds: caching", "crd", crd.Name, "err", err)
		return false
	}
	s.fields.SetCustom(rs, crdModels(rs))
	s.custom.mu.Lock()
	if in != nil {
		for _, gvr := range in.gvrs {
			delete(s.custom.handlers, gvr)
		}
	}
	next := &installedCRD{fingerprint: fp, segment: seg}
	for _, h := range handlers {
		s.custom.handlers[h.GroupVersionResource()] = h
		next.gvrs = append(next.gvrs, h.GroupVersionResource())
	}
	s.custom.installed[crd.Name] = next
	s.custom.mu.Unlock()
	s.log.Info("crds: serving", "crd", crd.Name, "versions", len(handlers))
	return true
}

func selectablePaths(crd *apiextv1.CustomResourceDefinition, version string) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		for _, sf := range v.SelectableFields {
			out = append(out, strings.TrimPrefix(sf.JSONPath, "."))
		}
	}
	return out
}

// uninstallCRD stops serving a CRD's resources.
func (s *Server) uninstallCRD(name string) {
	s.custom.mu.Lock()
	in := s.custom.installed[name]
	if in == nil {
		s.custom.mu.Unlock()
		return
	}
	var kinds []schema.GroupVersionKind
	for _, gvr := range in.gvrs {
		if h := s.custom.handlers[gvr]; h != nil {
			kinds = append(kinds, h.GroupVersionKind())
		}
		delete(s.custom.handlers, gvr)
	}
	delete(s.custom.installed, name)
	s.custom.mu.Unlock()
	s.fields.RemoveCustom(kinds)
	s.cache.RemoveResource(in.segment)
	s.log.Info("crds: no longer serving", "crd", name)
}

// publishAPIs rebuilds discovery and the OpenAPI documents after the custom
// resources changed.
func (s *Server) publishAPIs() {
	s.discovery.Store(s.buildDiscovery())
	s.aggregator.LocalChanged()
	if s.customOpenAPI != nil {
		s.customOpenAPI(s.customResources())
	}
}

// customResources lists the registry Resources of every installed custom resource.
func (s *Server) customResources() []*registry.Resource {
	hs := s.custom.all()
	out := make([]*registry.Resource, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.Resource)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GroupVersionResource().String() < out[j].GroupVersionResource().String()
	})
	return out
}

// crdModels are the OpenAPI models of a CRD's served versions, for server-side apply.
func crdModels(rs []*registry.Resource) map[string]*spec.Schema {
	models := map[string]*spec.Schema{}
	for _, r := range rs {
		if r.OpenAPIModel != nil {
			models[customresource.ModelName(r.GroupVersionKind())] = r.OpenAPIModel
		}
	}
	return models
}

// pruneMutated drops from a custom resource what mutating admission (a webhook's
// patch) added that its schema does not know, as upstream prunes after mutation;
// unlike a client's unknown fields, these are dropped silently.
func pruneMutated(h *resourceHandler, obj runtime.Object) {
	if h.Prune != nil && obj != nil {
		h.Prune(obj)
	}
}

// pruneUnknown drops the fields a custom resource's schema does not know from a
// decoded body and adds them to the strict decoding problems, worded as upstream
// words unknown fields, for fieldValidation to refuse, report or ignore.
func pruneUnknown(h *resourceHandler, obj runtime.Object, strictErr error) error {
	if h.Prune == nil {
		return strictErr
	}
	unknown := h.Prune(obj)
	if len(unknown) == 0 {
		return strictErr
	}
	var problems []error
	if strictErr != nil {
		if se, ok := strictErr.(interface{ Errors() []error }); ok {
			problems = append(problems, se.Errors()...)
		} else {
			problems = append(problems, strictErr)
		}
	}
	for _, path := range unknown {
		problems = append(problems, fmt.Errorf("unknown field %q", path))
	}
	return runtime.NewStrictDecodingError(problems)
}
