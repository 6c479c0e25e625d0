package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"mizzen/internal/apiserver/compression"
	"mizzen/internal/storage"
)

// writeObject encodes obj in the negotiated media type. obj must carry its kind.
func (s *Server) writeObject(w http.ResponseWriter, code int, obj runtime.Object, mediaType string) {
	ser := s.codecs.serializer(mediaType)
	// The body is encoded whole before anything is sent (an encoding error is then a
	// clean 500), into buffers kept between responses: every response encodes, and
	// the writers below copy what they are given.
	rb := responseBuffers.Get().(*responseBuffer)
	defer rb.release()
	var err error
	if ea, ok := ser.(runtime.EncoderWithAllocator); ok {
		err = ea.EncodeWithAllocator(obj, &rb.buf, &rb.alloc)
	} else {
		err = ser.Encode(obj, &rb.buf)
	}
	if err != nil {
		s.log.Error("encoding response", "err", err, "type", fmt.Sprintf("%T", obj))
		s.writeStatus(w, apierrors.NewInternalError(err).Status())
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(rb.buf.Bytes())
}

// responseBuffer is writeObject's encoding buffer and the protobuf encoder's
// allocator, reused from one response to the next.
type responseBuffer struct {
	buf   bytes.Buffer
	alloc runtime.Allocator
}

var responseBuffers = sync.Pool{New: func() any { return new(responseBuffer) }}

// maxPooledResponse is the largest buffer kept for reuse: an object's response, not a
// big list's, which would otherwise stay in memory between lists.
const maxPooledResponse = 64 << 10

func (rb *responseBuffer) release() {
	if rb.buf.Cap() > maxPooledResponse {
		return
	}
	if cap(rb.alloc.Allocate(0)) > maxPooledResponse {
		return
	}
	rb.buf.Reset()
	responseBuffers.Put(rb)
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

// writeEntry writes a cached object as the response to a get, in its cached encoding
// (the bytes writeObject would write for it: JSON ends with one newline), and reports
// whether it did; other media types (YAML) are left to writeObject.
func (s *Server) writeEntry(w http.ResponseWriter, e *storage.Entry, mediaType string) bool {
	return s.writeEntryCode(w, e, mediaType, http.StatusOK)
}

// writeEntryCode is writeEntry with the response's status code.
func (s *Server) writeEntryCode(w http.ResponseWriter, e *storage.Entry, mediaType string, code int) bool {
	var data []byte
	var err error
	switch mediaType {
	case mediaJSON:
		data, err = e.Encoded(storage.JSONSlot, s.encodeJSONItem)
	case mediaProtobuf:
		if !e.HasProtobuf() {
			return false
		}
		data, err = e.Encoded(storage.ProtobufSlot, s.encodeProtobuf)
	default:
		return false
	}
	if err != nil {
		s.log.Error("encoding response", "key", e.Key, "err", err)
		s.writeStatus(w, apierrors.NewInternalError(err).Status())
		return true
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(data)
	if mediaType == mediaJSON && !bytes.HasSuffix(data, newline) {
		// A list's item has none; a watch event's, encoded first, may have it.
		_, _ = w.Write(newline)
	}
	return true
}

var newline = []byte("\n")

// encodeJSONItem is an object's JSON encoding as a list item carries it (no newline).
func (s *Server) encodeJSONItem(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	if err := s.codecs.json.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// writeJSONList writes a list served from the cache as JSON by joining each entry's
// cached encoding, so a large list is not re-encoded object by object on every request.
func (s *Server) writeJSONList(w http.ResponseWriter, h *resourceHandler, entries []*storage.Entry, rv int64) {
	items := make([][]byte, len(entries))
	for i, e := range entries {
		data, err := e.Encoded(storage.JSONSlot, s.encodeJSONItem)
		if err != nil {
			s.log.Error("encoding list item", "key", e.Key, "err", err)
			s.writeStatus(w, apierrors.NewInternalError(err).Status())
			return
		}
		items[i] = data
	}
	head := fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":[`,
		h.Kind+"List", h.GroupVersion.String(), rv)
	// A cached encoding is a watch event's object and names its kind; upstream's list
	// items do not (the list says it once), so the items go out without it. A custom
	// resource's items keep theirs, as upstream's: encoded from a map, they begin with
	// "apiVersion" and never match.
	itemType := fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,`, h.Kind, h.GroupVersion.String())
	list := jsonItems{entries: entries, items: items, itemType: itemType}
	const tail = "]}\n"
	w.Header().Set("Content-Type", mediaJSON)
	if gz := gzipStream(w, len(head)+list.size()+len(tail)); gz != nil {
		_, _ = gz.Write(head)
		_ = h.listChunks(storage.JSONSlot).Write(gz, list)
		_, _ = gz.Write([]byte(tail))
		return
	}
	writeList(w, head, list, []byte(tail))
}

// writeList writes a list's head, items and tail as they are, through a small buffer
// rather than joined: a list of many objects would otherwise be one more copy of all
// of them, garbage once sent.
func writeList(w http.ResponseWriter, head []byte, list compression.Items, tail []byte) {
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.Write(head)
	var item []byte
	for i := range list.Len() {
		item = list.Append(item[:0], i)
		_, _ = bw.Write(item)
	}
	_, _ = bw.Write(tail)
	_ = bw.Flush()
}

// jsonItems are a JSON list's items as they appear in the list: after a comma but
// the first, and without the kind the cached encoding names (see writeJSONList).
type jsonItems struct {
	entries  []*storage.Entry
	items    [][]byte
	itemType []byte
}

func (l jsonItems) Len() int                 { return len(l.items) }
func (l jsonItems) ID(i int) (string, int64) { return l.entries[i].Key, l.entries[i].RV }

func (l jsonItems) Append(dst []byte, i int) []byte {
	sep, rest := l.item(i)
	return append(append(dst, sep...), rest...)
}

// item is item i as the list has it: what comes before the cached encoding's bytes
// (a comma but for the first, and "{" where the kind was cut), and those bytes.
func (l jsonItems) item(i int) (sep string, rest []byte) {
	rest, cut := bytes.CutPrefix(l.items[i], l.itemType)
	switch {
	case i > 0 && cut:
		return ",{", rest
	case i > 0:
		return ",", rest
	case cut:
		return "{", rest
	}
	return "", rest
}

// size is the items' bytes in the list.
func (l jsonItems) size() int {
	n := 0
	for i := range l.items {
		sep, rest := l.item(i)
		n += len(sep) + len(rest)
	}
	return n
}

// protobufItems are a protobuf list's items: each the list's field 2 around the
// object's own message.
type protobufItems struct {
	entries []*storage.Entry
	items   [][]byte
}

func (l protobufItems) Len() int                 { return len(l.items) }
func (l protobufItems) ID(i int) (string, int64) { return l.entries[i].Key, l.entries[i].RV }

func (l protobufItems) Append(dst []byte, i int) []byte {
	dst = protowire.AppendVarint(protowire.AppendTag(dst, 2, protowire.BytesType), uint64(len(l.items[i])))
	return append(dst, l.items[i]...)
}

// gzipStream returns the gzip stream a list of size bytes is to be written to: a
// list past the compression threshold, to a client that accepts gzip, is written in
// runs of items compressed once (see compression.Chunks) rather than compressed
// afresh. Nil: the list is written to w as it is.
func gzipStream(w http.ResponseWriter, size int) *compression.Stream {
	cw, ok := w.(*compression.Writer)
	if !ok || size <= compression.Threshold {
		return nil
	}
	return cw.Gzip()
}

// encodeProtobuf is an object's protobuf encoding as a response or watch event
// carries it: the prefix, then a runtime.Unknown holding the object's own message.
func (s *Server) encodeProtobuf(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	if err := s.codecs.protobuf.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeProtobufList writes a list served from the cache as protobuf around each
// entry's cached encoding (the one a watch of the same object sends), so a large list
// is neither re-encoded nor built as one object. The bytes are the protobuf
// serializer's for the list object: the prefix, then a runtime.Unknown of the list
// kind whose raw message is the ListMeta (field 1) and the items (field 2).
func (s *Server) writeProtobufList(w http.ResponseWriter, h *resourceHandler, entries []*storage.Entry, rv int64) {
	listMeta := metav1.ListMeta{ResourceVersion: strconv.FormatInt(rv, 10)}
	lm, err := listMeta.Marshal()
	if err != nil {
		s.writeStatus(w, apierrors.NewInternalError(err).Status())
		return
	}
	items := make([][]byte, len(entries))
	body := 1 + protowire.SizeBytes(len(lm))
	for i, e := range entries {
		data, err := e.Encoded(storage.ProtobufSlot, s.encodeProtobuf)
		if err != nil {
			s.log.Error("encoding list item", "key", e.Key, "err", err)
			s.writeStatus(w, apierrors.NewInternalError(err).Status())
			return
		}
		raw, ok := storage.UnknownRaw(data)
		if !ok {
			s.writeStatus(w, apierrors.NewInternalError(fmt.Errorf("list item %s: malformed cached encoding", e.Key)).Status())
			return
		}
		items[i] = raw
		body += 1 + protowire.SizeBytes(len(raw))
	}
	typeMeta := runtime.TypeMeta{APIVersion: h.GroupVersion.String(), Kind: h.Kind + "List"}
	tm, err := typeMeta.Marshal()
	if err != nil {
		s.writeStatus(w, apierrors.NewInternalError(err).Status())
		return
	}
	head := append([]byte(nil), storage.ProtobufPrefix...)
	head = protowire.AppendBytes(protowire.AppendTag(head, 1, protowire.BytesType), tm)
	head = protowire.AppendVarint(protowire.AppendTag(head, 2, protowire.BytesType), uint64(body))
	head = protowire.AppendBytes(protowire.AppendTag(head, 1, protowire.BytesType), lm)
	// contentEncoding and contentType, empty, as runtime.Unknown always writes them.
	tail := []byte{3<<3 | byte(protowire.BytesType), 0, 4<<3 | byte(protowire.BytesType), 0}
	size := len(head) + body - 1 - protowire.SizeBytes(len(lm)) + len(tail)
	list := protobufItems{entries: entries, items: items}
	w.Header().Set("Content-Type", mediaProtobuf)
	if gz := gzipStream(w, size); gz != nil {
		_, _ = gz.Write(head)
		_ = h.listChunks(storage.ProtobufSlot).Write(gz, list)
		_, _ = gz.Write(tail)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(size))
	writeList(w, head, list, tail)
}
