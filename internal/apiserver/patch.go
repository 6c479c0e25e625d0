package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxJSONPatchOperations bounds a JSON patch, as upstream does.
const maxJSONPatchOperations = 10000

// applyPatch applies a patch document to current (in the served version) and decodes
// the result, applying fieldValidation to it.
func (s *Server) applyPatch(w http.ResponseWriter, r *http.Request, h *resourceHandler, current runtime.Object, patchType string, patch []byte) (runtime.Object, error) {
	if _, custom := current.(*unstructured.Unstructured); !custom && types.PatchType(patchType) == types.StrategicMergePatchType {
		return s.strategicPatchTyped(w, r, h, current, patch)
	}
	currentJSON, err := json.Marshal(current)
	if err != nil {
		return nil, err
	}
	var patched []byte
	switch types.PatchType(patchType) {
	case types.JSONPatchType:
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
		}
		if patched, err = applyJSONPatch(ops, currentJSON); err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		if !json.Valid(patch) {
			return nil, apierrors.NewBadRequest("error decoding patch: invalid JSON")
		}
		if patched, err = jsonpatch.MergePatch(currentJSON, patch); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	case types.StrategicMergePatchType:
		var patchMap map[string]interface{}
		if err := json.Unmarshal(patch, &patchMap); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		if patched, err = strategicpatch.StrategicMergePatch(currentJSON, patch, h.New()); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	case types.ApplyYAMLPatchType:
		// Apply is served by serverSideApply on objects and their status; the other
		// subresources do not take it.
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
			"server-side apply is not supported on this subresource; use a merge or strategic merge patch", 0, false)
	default:
		return nil, unsupportedPatchType()
	}
	obj := h.New()
	strictErr, err := s.codecs.decodeInto(mediaJSON, patched, h.GroupVersionKind(), obj)
	if err != nil {
		return nil, err
	}
	strictErr = pruneUnknown(h, obj, strictErr)
	if err := applyFieldValidation(w, r, strictErr); err != nil {
		return nil, err
	}
	if h.Strategy != nil {
		h.Strategy.Default(obj)
	}
	return obj, nil
}

// strategicPatchTyped applies a strategic merge patch to a built-in object as upstream's
// patcher does: on the object's unstructured map, converted straight back into a typed
// object, with the unknown fields the conversion meets left to fieldValidation. (A
// detour through JSON text costs an encode and a strict decode more.)
func (s *Server) strategicPatchTyped(w http.ResponseWriter, r *http.Request, h *resourceHandler, current runtime.Object, patch []byte) (runtime.Object, error) {
	var patchMap map[string]interface{}
	if err := utiljson.Unmarshal(patch, &patchMap); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	if patchMap == nil {
		// "null" decodes to no map; it patches nothing, as the JSON-text path found.
		patchMap = map[string]interface{}{}
	}
	// The merge works key by key at the top: when the patch names only some of
	// metadata, spec and status, only those are converted to maps and back, and the
	// rest of current (this request's own copy) is kept as it is.
	fields := patchedFields(current, patchMap)
	var original map[string]interface{}
	var err error
	if fields != nil {
		original = make(map[string]interface{}, len(fields))
		for key, f := range fields {
			if original[key], err = runtime.DefaultUnstructuredConverter.ToUnstructured(f.Addr().Interface()); err != nil {
				return nil, err
			}
		}
	} else if original, err = runtime.DefaultUnstructuredConverter.ToUnstructured(current); err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergeMapPatch(original, patchMap, h.New())
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj := h.New()
	var strictErr error
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(patched, obj, true); err != nil {
		if !runtime.IsStrictDecodingError(err) {
			// Upstream's words for a patch that does not fit the type.
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
				field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patchMap), err.Error())})
		}
		strictErr = err
	}
	if fields != nil {
		for key, f := range fields {
			f.Set(reflect.ValueOf(obj).Elem().FieldByName(patchableFields[key]))
		}
		obj = current
	}
	// A patch may not turn the object into another kind, as decoding it would find.
	want := h.GroupVersionKind()
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Version != "" && gvk.GroupVersion() != want.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion().String(), want.GroupVersion().String()))
	} else if gvk.Kind != "" && gvk.Kind != want.Kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: the kind in the data does not match the kind of the resource", gvk.Kind, want.Version, want.Kind))
	}
	if err := applyFieldValidation(w, r, strictErr); err != nil {
		return nil, err
	}
	if h.Strategy != nil {
		h.Strategy.Default(obj)
	}
	return obj, nil
}

// patchableFields are the top-level fields a patch may touch alone (see
// patchedFields), by JSON name.
var patchableFields = map[string]string{"metadata": "ObjectMeta", "spec": "Spec", "status": "Status"}

// patchedFields returns the fields of current (a pointer to a struct) that patch
// names, by JSON name, when it names nothing else: no directive, no apiVersion or kind,
// no unknown field. Otherwise nil: the whole object goes through the merge.
func patchedFields(current runtime.Object, patch map[string]interface{}) map[string]reflect.Value {
	v := reflect.ValueOf(current)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || len(patch) == 0 {
		return nil
	}
	fields := make(map[string]reflect.Value, len(patch))
	for key := range patch {
		name, ok := patchableFields[key]
		if !ok {
			return nil
		}
		sf, ok := v.Elem().Type().FieldByName(name)
		if !ok || len(sf.Index) != 1 || sf.Type.Kind() != reflect.Struct || strings.Split(sf.Tag.Get("json"), ",")[0] != key {
			return nil
		}
		fields[key] = v.Elem().FieldByIndex(sf.Index)
	}
	return fields
}

// supportedPatchType says whether a PATCH body's media type is one the server takes.
func supportedPatchType(patchType string) bool {
	switch types.PatchType(patchType) {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
		return true
	}
	return false
}

// unsupportedPatchType is the 415 for any other body, apply-patch+cbor included:
// upstream takes that one only behind a feature gate.
func unsupportedPatchType() error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s, %s",
			types.JSONPatchType, types.MergePatchType, types.ApplyYAMLPatchType, types.StrategicMergePatchType), 0, false)
}

// applyJSONPatch applies ops, turning a panic of the patch library (it panics on some
// malformed operations, such as replacing the root path) into an error.
func applyJSONPatch(ops jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("the JSON patch could not be applied: %v", r)
		}
	}()
	return ops.Apply(doc)
}
