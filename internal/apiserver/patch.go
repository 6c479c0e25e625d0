package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// maxJSONPatchOperations bounds a JSON patch, as upstream does.
const maxJSONPatchOperations = 10000

// applyPatch applies a patch document to current (in the served version) and decodes
// the result, applying fieldValidation to it.
func (s *Server) applyPatch(w http.ResponseWriter, r *http.Request, h *resourceHandler, current runtime.Object, patchType string, patch []byte) (runtime.Object, error) {
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
