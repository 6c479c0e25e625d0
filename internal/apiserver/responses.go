package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/storage"
)

// writeObject encodes obj in the negotiated media type. obj must carry its kind.
func (s *Server) writeObject(w http.ResponseWriter, code int, obj runtime.Object, mediaType string) {
	ser := s.codecs.serializer(mediaType)
	var buf bytes.Buffer
	if err := ser.Encode(obj, &buf); err != nil {
		s.log.Error("encoding response", "err", err, "type", fmt.Sprintf("%T", obj))
		s.writeStatus(w, apierrors.NewInternalError(err).Status())
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// writeError answers with a metav1.Status for err.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var status metav1.Status
	if se, ok := err.(apierrors.APIStatus); ok || errors.As(err, &se) {
		status = se.Status()
	} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		status = apierrors.NewTimeoutError("the request was cancelled or timed out", 0).Status()
	} else {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		status = apierrors.NewInternalError(err).Status()
	}
	s.writeStatus(w, status)
}

func (s *Server) writeStatus(w http.ResponseWriter, status metav1.Status) {
	status.Kind, status.APIVersion = "Status", "v1"
	if status.Status == "" {
		status.Status = metav1.StatusFailure
	}
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if d := status.Details; d != nil && d.RetryAfterSeconds > 0 {
		// Clients (client-go's retries, reflectors) wait as long as the header says.
		w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	s.writeObject(w, code, &status, mediaJSON)
}

// storageError turns a storage error about one object into the status upstream returns.
func storageError(err error, gr schema.GroupResource, name string) error {
	var ke *storage.KeyError
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	case errors.Is(err, storage.ErrAlreadyExists):
		return apierrors.NewAlreadyExists(gr, name)
	case errors.Is(err, storage.ErrConflict):
		return apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	case errors.Is(err, storage.ErrExpired):
		msg := "too old resource version"
		if errors.As(err, &ke) && ke.Detail != "" {
			msg = ke.Detail
		}
		return apierrors.NewResourceExpired(msg)
	case errors.Is(err, storage.ErrTooLargeRV):
		msg := "Too large resource version"
		if errors.As(err, &ke) && ke.Detail != "" {
			msg = ke.Detail
		}
		se := apierrors.NewTimeoutError(msg, 1)
		se.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
		return se
	}
	return err
}

func notFound() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "the server could not find the requested resource", 0, false)
}

// writeJSONList writes a list served from the cache as JSON by joining each entry's
// cached encoding, so a large list is not re-encoded object by object on every request.
func (s *Server) writeJSONList(w http.ResponseWriter, h *resourceHandler, entries []*storage.Entry, rv int64) {
	encode := func(obj runtime.Object) ([]byte, error) {
		var buf bytes.Buffer
		if err := s.codecs.json.Encode(obj, &buf); err != nil {
			return nil, err
		}
		return bytes.TrimSpace(buf.Bytes()), nil
	}
	items := make([][]byte, len(entries))
	size := 128
	for i, e := range entries {
		data, err := e.Encoded(0, encode)
		if err != nil {
			s.log.Error("encoding list item", "key", e.Key, "err", err)
			s.writeStatus(w, apierrors.NewInternalError(err).Status())
			return
		}
		items[i] = data
		size += len(data) + 1
	}
	out := make([]byte, 0, size)
	out = fmt.Appendf(out, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":[`,
		h.Kind+"List", h.GroupVersion.String(), rv)
	for i, item := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, item...)
	}
	out = append(out, "]}\n"...)
	w.Header().Set("Content-Type", mediaJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}
