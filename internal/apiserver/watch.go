package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"mizzen/internal/apiserver/flowcontrol"
	"mizzen/internal/storage"
)

// minWatchTimeout: a watch without timeoutSeconds ends after 30 to 60 minutes, as
// upstream spreads them, so clients re-establish and load spreads across apiservers.
const minWatchTimeout = 30 * time.Minute

// indexedField is the field the watch cache indexes the watchers of gr by: pods by
// spec.nodeName, which every kubelet's watch selects one value of (as upstream's watch
// cache indexes them), so a pod's change wakes its node's kubelet, not all of them.
func indexedField(gr schema.GroupResource) string {
	if gr == podsGVR.GroupResource() {
		return "spec.nodeName"
	}
	return ""
}

func (s *Server) watch(w http.ResponseWriter, r *http.Request, info *requestInfo, h *resourceHandler) {
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
	wopts := storage.WatchOptions{KeyPrefix: h.listPrefix(info.Namespace), Match: opts.matcher(h), Bookmarks: opts.bookmarks}
	if f := indexedField(h.GroupVersionResource().GroupResource()); f != "" && !h.converted() && opts.fields != nil {
		wopts.IndexValue, wopts.Indexed = opts.fields.RequiresExactMatch(f)
	}
	if info.Name != "" {
		wopts.KeyPrefix = h.key(info.Namespace, info.Name)
	}
	fromRV, _ := parseRV(opts.rv)
	switch {
	case opts.sendInitial != nil && *opts.sendInitial:
		if opts.rvMatch != string(metav1.ResourceVersionMatchNotOlderThan) {
			s.writeError(w, r, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "",
				field.ErrorList{field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")}))
			return
		}
		// Watch-list: the state at least as new as asked (a consistent read when no
		// version is given), then a bookmark that ends it.
		minRV := fromRV
		if opts.rv == "" {
			if minRV, err = s.store.CurrentRevision(r.Context()); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if err := s.cache.WaitFresh(r.Context(), minRV, consistentReadTimeout); err != nil {
			s.writeError(w, r, storageError(err, h.GroupVersionResource().GroupResource(), ""))
			return
		}
		wopts.InitialEvents, wopts.InitialEventsEnd = true, opts.bookmarks
	case opts.sendInitial == nil && (opts.rv == "" || opts.rv == "0"):
		// Legacy: a watch from no version starts with the current state.
		wopts.InitialEvents = true
	default:
		wopts.FromRV = fromRV
		if fromRV > 0 {
			if err := s.cache.WaitFresh(r.Context(), fromRV, consistentReadTimeout); err != nil {
				s.writeError(w, r, storageError(err, h.GroupVersionResource().GroupResource(), ""))
				return
			}
		}
	}
	timeout := opts.timeout
	if timeout == 0 {
		timeout = minWatchTimeout + time.Duration(rand.Int64N(int64(minWatchTimeout)))
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	enc := s.newWatchEncoder(w, h, format)
	watcher, err := s.cache.Watch(h.segment, wopts)
	if errors.Is(err, storage.ErrStopped) {
		// The server is stopping. Like upstream's shutdown-send-retry-after, a 429 with
		// Retry-After: client-go then retries the watch from its resource version; any
		// other error, or an empty stream, would make it list everything again.
		s.writeError(w, r, apierrors.NewTooManyRequests("The apiserver is shutting down, please try again later.", 1))
		return
	}
	if err != nil {
		// A watch from a compacted version is answered inside the stream, as upstream does.
		enc.start()
		_ = enc.sendStatus(storageError(err, h.GroupVersionResource().GroupResource(), ""))
		return
	}
	defer s.cache.StopWatch(watcher)
	enc.start()
	// The events the watch starts with (the objects, or the changes since its version)
	// are its initialization: once they are written, API Priority and Fairness frees
	// the seat the watch held for them, as upstream's watch cache signals it.
	if !enc.sendAll(watcher.Queued()) {
		return
	}
	flowcontrol.WatchInitialized(r.Context())
	for {
		events, err := watcher.Next(ctx)
		if err != nil {
			if errors.Is(err, storage.ErrWatcherTooSlow) {
				s.log.Debug("ending slow watch", "resource", h.GroupVersionResource().String())
			}
			return
		}
		if !enc.sendAll(events) {
			return
		}
	}
}

// sendAll writes the events and flushes them; false if the client is gone.
func (e *watchEncoder) sendAll(events []*storage.Event) bool {
	for _, ev := range events {
		if err := e.send(ev); err != nil {
			return false
		}
	}
	e.flush()
	return true
}

// watchEncoder writes watch events in the negotiated format.
type watchEncoder struct {
	s               *Server
	w               http.ResponseWriter
	h               *resourceHandler
	format          outputFormat
	stream          streaming.Encoder
	embed           runtime.Serializer
	slot            int
	tableHeaderSent bool
}

func (s *Server) newWatchEncoder(w http.ResponseWriter, h *resourceHandler, format outputFormat) *watchEncoder {
	e := &watchEncoder{s: s, w: w, h: h, format: format}
	framer, outer := s.codecs.jsonFramer, s.codecs.json
	e.embed = s.codecs.json
	if format.mediaType == mediaProtobuf {
		framer, outer = s.codecs.protobufFramer, s.codecs.protobufRaw
		e.embed = s.codecs.protobuf
		e.slot = 1
	}
	e.stream = streaming.NewEncoder(framer.NewFrameWriter(w), outer)
	return e
}

func (e *watchEncoder) start() {
	ct := e.format.mediaType
	if ct == mediaProtobuf {
		ct += ";stream=watch"
	}
	e.w.Header().Set("Content-Type", ct)
	e.w.Header().Set("Cache-Control", "no-cache, private")
	e.w.WriteHeader(http.StatusOK)
	e.flush()
}

func (e *watchEncoder) flush() {
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *watchEncoder) encode(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	if err := e.embed.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (e *watchEncoder) send(ev *storage.Event) error {
	var raw []byte
	var err error
	switch {
	case ev.Type == watch.Bookmark:
		// A bookmark is an empty object of the kind the client decodes.
		rv := strconv.FormatInt(ev.RV, 10)
		var obj runtime.Object
		switch e.format.as {
		case "Table":
			table := &metav1.Table{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
			setMetaKind(table, "Table", e.format.asVersion)
			obj = table
		case "":
			obj = e.h.New()
			obj.GetObjectKind().SetGroupVersionKind(e.h.GroupVersionKind())
		default:
			pom := &metav1.PartialObjectMetadata{}
			setMetaKind(pom, "PartialObjectMetadata", e.format.asVersion)
			obj = pom
		}
		if acc, aerr := meta.Accessor(obj); aerr == nil {
			acc.SetResourceVersion(rv)
			if ev.IsInitialEventsEnd() {
				acc.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			}
		}
		raw, err = e.encode(obj)
	case e.format.as == "Table":
		obj, perr := e.h.presentEntry(ev.Entry)
		if perr != nil {
			return perr
		}
		table, terr := e.s.toTable(e.h, []runtime.Object{obj}, nil, false)
		if terr != nil {
			return terr
		}
		if e.tableHeaderSent {
			table.ColumnDefinitions = nil
		}
		e.tableHeaderSent = true
		setMetaKind(table, "Table", e.format.asVersion)
		raw, err = e.encode(table)
	case e.format.as != "":
		obj, perr := e.h.presentEntry(ev.Entry)
		if perr != nil {
			return perr
		}
		pom := toPartial(obj)
		setMetaKind(pom, "PartialObjectMetadata", e.format.asVersion)
		raw, err = e.encode(pom)
	case e.h.converted():
		obj, perr := e.h.presentEntry(ev.Entry)
		if perr != nil {
			return perr
		}
		raw, err = e.encode(obj)
	default:
		raw, err = ev.Entry.Encoded(e.slot, e.encode)
	}
	if err != nil {
		return fmt.Errorf("encoding watch event: %w", err)
	}
	return e.stream.Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw}})
}

// sendStatus ends a stream with an ERROR event.
func (e *watchEncoder) sendStatus(err error) error {
	var status metav1.Status
	if se, ok := err.(apierrors.APIStatus); ok {
		status = se.Status()
	} else {
		status = apierrors.NewInternalError(err).Status()
	}
	status.Kind, status.APIVersion = "Status", "v1"
	raw, encErr := e.encode(&status)
	if encErr != nil {
		return encErr
	}
	err = e.stream.Encode(&metav1.WatchEvent{Type: string(watch.Error), Object: runtime.RawExtension{Raw: raw}})
	e.flush()
	return err
}
