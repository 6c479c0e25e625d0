package apiserver

import (
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"mizzen/internal/apiserver/fieldmanager"
)

// selfManager is the manager of the writes the server makes itself, as upstream's
// loopback client is recorded.
const selfManager = "kube-apiserver"

// fieldOwner says who makes a write, for metadata.managedFields. Every client write
// carries one into createObject or updateObject, which record it in one place; a nil
// owner (a binding, the server's own bookkeeping) leaves managedFields as they are,
// as upstream's direct storage writes do.
type fieldOwner struct {
	manager string
	// subresource is the one written ("" for the object itself).
	subresource string
	// applied: the object was merged by server-side apply, which has recorded the
	// ownership already.
	applied bool
}

// writeOwner checks a create, update or (non-apply) patch request's fieldManager and
// force parameters and names the manager the write is recorded under: fieldManager,
// or else the user agent's prefix.
func writeOwner(r *http.Request, verb, subresource string) (*fieldOwner, error) {
	q := r.URL.Query()
	manager := q.Get("fieldManager")
	var errs field.ErrorList
	kind := "CreateOptions"
	switch verb {
	case "create":
		errs = metav1validation.ValidateCreateOptions(&metav1.CreateOptions{FieldManager: manager})
	case "update":
		kind = "UpdateOptions"
		errs = metav1validation.ValidateUpdateOptions(&metav1.UpdateOptions{FieldManager: manager})
	default:
		kind = "PatchOptions"
		force, err := forceParam(q.Get("force"), q.Has("force"))
		if err != nil {
			return nil, err
		}
		// Apply requests are checked by readApply; anything else is a non-apply patch.
		errs = metav1validation.ValidatePatchOptions(&metav1.PatchOptions{FieldManager: manager, Force: force}, types.MergePatchType)
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return &fieldOwner{manager: fieldmanager.ManagerName(manager, r.UserAgent()), subresource: subresource}, nil
}

func forceParam(value string, set bool) (*bool, error) {
	if !set {
		return nil, nil
	}
	force, err := strconv.ParseBool(value)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid force %q: %v", value, err))
	}
	return &force, nil
}

// isApply says whether a patch is a server-side apply.
func isApply(patchType string) bool {
	return patchType == string(types.ApplyYAMLPatchType)
}

// serverSideApply serves a PATCH with an apply configuration: it merges the
// configuration into the object for its manager, creating the object if there is none
// (not through a subresource), and answers 201 for a create, 200 otherwise.
func (s *Server) serverSideApply(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler, mode updateMode) {
	format, data, err := readWriteRequest(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	subresource := mode.subresource()
	owner, force, config, err := readApply(w, r, subresource, data)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	gvk := h.GroupVersionKind()
	apply := func(live runtime.Object) (runtime.Object, error) {
		obj, err := s.fields.Apply(gvk, subresource, live, config.DeepCopy(), owner.manager, force)
		if err != nil {
			return nil, err
		}
		acc := accessor(obj)
		if acc.GetName() != info.Name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", acc.GetName(), info.Name))
		}
		if h.Namespaced && acc.GetNamespace() != "" && acc.GetNamespace() != info.Namespace {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		return obj, nil
	}
	// A create and an update can race with other writers: try again on either loss.
	for attempt := 0; ; attempt++ {
		updated, err := s.updateObject(ctx, h, info.Namespace, info.Name, mode, isDryRun(r), owner, apply)
		if err == nil {
			s.respondObject(w, r, http.StatusOK, h, updated, format)
			return
		}
		if !apierrors.IsNotFound(err) || mode != updateMain || attempt >= 3 {
			s.writeError(w, r, err)
			return
		}
		created, err := s.applyCreate(r, info, h, owner, apply)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.respondObject(w, r, http.StatusCreated, h, created, format)
		return
	}
}

// readApply checks an apply request's parameters and decodes its body.
func readApply(w http.ResponseWriter, r *http.Request, subresource string, data []byte) (*fieldOwner, bool, *unstructured.Unstructured, error) {
	q := r.URL.Query()
	force, err := forceParam(q.Get("force"), q.Has("force"))
	if err != nil {
		return nil, false, nil, err
	}
	opts := &metav1.PatchOptions{FieldManager: q.Get("fieldManager"), Force: force}
	if errs := metav1validation.ValidatePatchOptions(opts, types.ApplyYAMLPatchType); len(errs) > 0 {
		return nil, false, nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	config := &unstructured.Unstructured{Object: map[string]interface{}{}}
	if err := yaml.Unmarshal(data, &config.Object); err != nil {
		return nil, false, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	if config.Object == nil {
		return nil, false, nil, apierrors.NewBadRequest("error decoding YAML: the apply configuration is empty")
	}
	// Duplicate fields: refused with Strict, reported with Warn, as for other writes.
	if strictErr := yaml.UnmarshalStrict(data, &map[string]interface{}{}); strictErr != nil {
		if err := applyFieldValidation(w, r, strictErr); err != nil {
			return nil, false, nil, err
		}
	}
	owner := &fieldOwner{manager: opts.FieldManager, subresource: subresource, applied: true}
	return owner, force != nil && *force, config, nil
}

// applyCreate creates the object an apply configuration describes when there is none.
func (s *Server) applyCreate(r *http.Request, info *requestInfo, h *resourceHandler, owner *fieldOwner, apply func(runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	live := h.New()
	live.GetObjectKind().SetGroupVersionKind(h.GroupVersionKind())
	obj, err := apply(live)
	if err != nil {
		return nil, err
	}
	acc := accessor(obj)
	if uid := acc.GetUID(); uid != "" {
		return nil, apierrors.NewConflict(h.GroupVersionResource().GroupResource(), info.Name,
			fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
	}
	return s.createObject(r.Context(), h, info.Namespace, obj, isDryRun(r), owner)
}

// trackFields records owner as the owner of what obj changes from live (nil live for
// a create) in obj's managedFields. It is the one place Create, Update and Patch
// requests meet the field manager; apply has merged and recorded already.
func (s *Server) trackFields(h *resourceHandler, owner *fieldOwner, live, obj runtime.Object) runtime.Object {
	if owner == nil || owner.applied {
		return obj
	}
	if live == nil {
		live = h.New()
		live.GetObjectKind().SetGroupVersionKind(h.GroupVersionKind())
		if owner.subresource == "" {
			return s.fields.Create(h.GroupVersionKind(), live, obj, owner.manager)
		}
	}
	return s.fields.Update(h.GroupVersionKind(), owner.subresource, live, obj, owner.manager)
}
