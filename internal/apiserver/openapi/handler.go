package openapi

import (
	"bytes"
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
	offers := []offer{
		{mediaJSON, mediaJSON, d.v2},
		{mediaProtoV2, mediaProtoV2, d.v2Proto},
		{mediaProtoV2Deprecated, mediaProtoV2, d.v2Proto},
	}
	o, ok := negotiate(r, offers)
	if !ok {
		http.Error(w, "the OpenAPI v2 document is served as application/json or "+mediaProtoV2, http.StatusNotAcceptable)
		return
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	serveDoc(w, r, o.doc, o.contentType)
}

func (d *Documents) serveV3(w http.ResponseWriter, r *http.Request, key string) {
	doc, found := d.v3[strings.TrimSuffix(key, "/")]
	if !found {
		http.NotFound(w, r)
		return
	}
	if _, ok := negotiate(r, []offer{{mediaJSON, mediaJSON, doc}}); !ok {
		http.Error(w, "OpenAPI v3 documents are served as application/json", http.StatusNotAcceptable)
		return
	}
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != doc.etag {
			// A stale hash: send the client to the current document.
			http.Redirect(w, r, serverRelativeURL(key, doc.etag), http.StatusMovedPermanently)
			return
		}
		// A hashed URL names one version of the document forever.
		w.Header().Set("Cache-Control", "public, immutable")
		w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
	} else {
		w.Header().Set("Cache-Control", "no-cache, private")
	}
	serveDoc(w, r, doc, mediaJSON)
}

// offer is one form a document can be served in: accepted names the media type a
// client may ask for, contentType the one the response carries.
type offer struct {
	accepted    string
	contentType string
	doc         servedDoc
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

// serveDoc writes a document with its ETag; http.ServeContent answers conditional
// (If-None-Match) and HEAD requests.
func serveDoc(w http.ResponseWriter, r *http.Request, doc servedDoc, contentType string) {
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Set("Content-Type", contentType)
	h.Set("Etag", `"`+doc.etag+`"`)
	http.ServeContent(w, r, "", doc.lastModified, bytes.NewReader(doc.data))
}
