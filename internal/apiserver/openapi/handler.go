package openapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/munnerz/goautoneg"
)

// Media types of the documents. client-go asks for the v2 protobuf form under its
// older name with "@"; upstream answers with the newer name.
const (
	mediaJSON              = "application/json"
	mediaProtoV2           = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaProtoV2Deprecated = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mediaProtoV3           = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
	mediaProtoV3Deprecated = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

// serverRelativeURL is the hashed address of a v3 document in the v3 index.
func serverRelativeURL(key, etag string) string {
	return "/openapi/v3/" + key + "?" + url.Values{"hash": {etag}}.Encode()
}

// ServeHTTP serves /openapi/v2, the v3 index at /openapi/v3 and each v3 document at
// /openapi/v3/<key> (e.g. /openapi/v3/apis/apps/v1).
func (d *Documents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch p := r.URL.Path; {
	case p == "/openapi/v2":
		d.serveV2(w, r)
	case p == "/openapi/v3" || p == "/openapi/v3/":
		w.Header().Set("Cache-Control", "no-cache, private")
		serveDoc(w, r, d.v3Index, mediaJSON)
	case strings.HasPrefix(p, "/openapi/v3/"):
		d.serveV3(w, r, strings.TrimPrefix(p, "/openapi/v3/"))
	default:
		http.NotFound(w, r)
	}
}

func (d *Documents) serveV2(w http.ResponseWriter, r *http.Request) {
	asJSON := func() (storedDoc, error) { return d.v2, nil }
	offers := []offer{
		{mediaJSON, mediaJSON, asJSON},
		{mediaProtoV2, mediaProtoV2, d.v2Proto.get},
		{mediaProtoV2Deprecated, mediaProtoV2, d.v2Proto.get},
	}
	o, ok := negotiate(r, offers)
	if !ok {
		http.Error(w, "the OpenAPI v2 document is served as application/json or "+mediaProtoV2, http.StatusNotAcceptable)
		return
	}
	doc, err := o.doc()
	if err != nil {
		slog.ErrorContext(r.Context(), "building the OpenAPI v2 protobuf document", "err", err)
		http.Error(w, "the OpenAPI v2 document is unavailable in this form", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	serveDoc(w, r, doc, o.contentType)
}

func (d *Documents) serveV3(w http.ResponseWriter, r *http.Request, key string) {
	key = strings.TrimSuffix(key, "/")
	doc, found := d.v3[key]
	if !found {
		http.NotFound(w, r)
		return
	}
	asJSON := func() (storedDoc, error) { return doc, nil }
	o, ok := negotiate(r, []offer{
		{mediaJSON, mediaJSON, asJSON},
		{mediaProtoV3, mediaProtoV3, d.v3Proto[key].get},
		{mediaProtoV3Deprecated, mediaProtoV3, d.v3Proto[key].get},
	})
	if !ok {
		http.Error(w, "OpenAPI v3 documents are served as application/json or "+mediaProtoV3, http.StatusNotAcceptable)
		return
	}
	hash := r.URL.Query().Get("hash")
	if hash != "" && hash != doc.etag {
		// A stale hash: send the client to the current document.
		http.Redirect(w, r, serverRelativeURL(key, doc.etag), http.StatusMovedPermanently)
		return
	}
	served, err := o.doc()
	if err != nil {
		slog.ErrorContext(r.Context(), "building an OpenAPI v3 protobuf document", "key", key, "err", err)
		http.Error(w, "the OpenAPI v3 document is unavailable in this form", http.StatusInternalServerError)
		return
	}
	if hash != "" {
		// A hashed URL names one version of the document forever.
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	} else {
		w.Header().Set("Cache-Control", "no-cache, private")
	}
	serveDoc(w, r, served, o.contentType)
}

// offer is one form a document can be served in: accepted names the media type a
// client may ask for, contentType the one the response carries.
type offer struct {
	accepted    string
	contentType string
	doc         func() (storedDoc, error)
}

// negotiate picks the first offer matching the client's Accept header, taking the
// clauses in order of preference; no header accepts anything.
func negotiate(r *http.Request, offers []offer) (offer, bool) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, o := range offers {
			typ, sub, _ := strings.Cut(o.accepted, "/")
			if (clause.Type == typ || clause.Type == "*") && (clause.SubType == sub || clause.SubType == "*") {
				return o, true
			}
		}
	}
	return offer{}, false
}

// serveDoc writes a document with its ETag, compressed if the client accepts gzip;
// http.ServeContent answers conditional (If-None-Match) and HEAD requests.
func serveDoc(w http.ResponseWriter, r *http.Request, doc storedDoc, contentType string) {
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Type", contentType)
	h.Set("Etag", `"`+doc.etag+`"`)
	body := doc.gz
	if acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
	} else {
		var err error
		if body, err = doc.bytes(); err != nil {
			slog.ErrorContext(r.Context(), "decompressing an OpenAPI document", "err", err)
			http.Error(w, "the OpenAPI document is unavailable", http.StatusInternalServerError)
			return
		}
	}
	http.ServeContent(w, r, "", doc.lastModified, bytes.NewReader(body))
}
