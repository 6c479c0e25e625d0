package openapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
)

func buildTestDocuments(t *testing.T) *Documents {
	t.Helper()
	docs, err := Build(testResources())
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return docs
}

func TestServeHTTP(t *testing.T) {
	docs := buildTestDocuments(t)
	appsHash := docs.v3["apis/apps/v1"].etag
	tests := []struct {
		name        string
		method      string
		path        string
		header      map[string]string
		wantStatus  int
		wantType    string
		wantHeaders map[string]string // "" means the header must be absent
		check       func(t *testing.T, body []byte)
	}{{
		name: "v2 as JSON by default", path: "/openapi/v2",
		wantStatus: http.StatusOK, wantType: "application/json",
		wantHeaders: map[string]string{"Etag": `"` + docs.v2.etag + `"`, "Vary": "Accept"},
		check: func(t *testing.T, body []byte) {
			var doc struct {
				Swagger     string
				Definitions map[string]any
			}
			if err := json.Unmarshal(body, &doc); err != nil || doc.Swagger != "2.0" || doc.Definitions["io.k8s.api.apps.v1.Deployment"] == nil {
				t.Errorf("v2 JSON: swagger %q, %d definitions, err %v", doc.Swagger, len(doc.Definitions), err)
			}
		},
	}, {
		name: "v2 as protobuf, as client-go asks", path: "/openapi/v2",
		header:     map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json"},
		wantStatus: http.StatusOK, wantType: "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
		check: func(t *testing.T, body []byte) {
			var doc openapiv2.Document
			if err := proto.Unmarshal(body, &doc); err != nil || doc.Swagger != "2.0" {
				t.Errorf("v2 protobuf: swagger %q, err %v", doc.Swagger, err)
			}
		},
	}, {
		name: "v2 protobuf under its current name", path: "/openapi/v2",
		header:     map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		wantStatus: http.StatusOK, wantType: "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
	}, {
		name: "v2 preference by q value", path: "/openapi/v2",
		header:     map[string]string{"Accept": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf;q=0.5, application/json"},
		wantStatus: http.StatusOK, wantType: "application/json",
	}, {
		name: "v2 compressed for a client accepting gzip", path: "/openapi/v2",
		header:     map[string]string{"Accept-Encoding": "gzip"},
		wantStatus: http.StatusOK, wantType: "application/json",
		wantHeaders: map[string]string{"Content-Encoding": "gzip"},
		check: func(t *testing.T, body []byte) {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(data, plain(t, docs.v2)) {
				t.Errorf("gunzipped body differs from the document (err %v)", err)
			}
		},
	}, {
		name: "v2 uncompressed when gzip is refused", path: "/openapi/v2",
		header:     map[string]string{"Accept-Encoding": "br, gzip;q=0"},
		wantStatus: http.StatusOK, wantType: "application/json",
		wantHeaders: map[string]string{"Content-Encoding": ""},
		check: func(t *testing.T, body []byte) {
			if !bytes.Equal(body, plain(t, docs.v2)) {
				t.Error("body differs from the document")
			}
		},
	}, {
		name: "v2 unacceptable type", path: "/openapi/v2",
		header:     map[string]string{"Accept": "text/html"},
		wantStatus: http.StatusNotAcceptable,
	}, {
		name: "v2 not modified", path: "/openapi/v2",
		header:     map[string]string{"If-None-Match": `"` + docs.v2.etag + `"`},
		wantStatus: http.StatusNotModified,
	}, {
		name: "v3 index", path: "/openapi/v3",
		wantStatus: http.StatusOK, wantType: "application/json",
		wantHeaders: map[string]string{"Cache-Control": "no-cache, private"},
		check: func(t *testing.T, body []byte) {
			var index struct {
				Paths map[string]struct{ ServerRelativeURL string }
			}
			if err := json.Unmarshal(body, &index); err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string]string{
				"apis/apps/v1": "/openapi/v3/apis/apps/v1?hash=" + appsHash,
				"api/v1":       "/openapi/v3/api/v1?hash=" + docs.v3["api/v1"].etag,
				"apis/apps":    "/openapi/v3/apis/apps?hash=" + docs.v3["apis/apps"].etag,
				"api":          "/openapi/v3/api?hash=" + docs.v3["api"].etag,
				"apis":         "/openapi/v3/apis?hash=" + docs.v3["apis"].etag,
				"version":      "/openapi/v3/version?hash=" + docs.v3["version"].etag,
			} {
				if got := index.Paths[key].ServerRelativeURL; got != want {
					t.Errorf("index %s = %q, want %q", key, got, want)
				}
			}
			if keys := docs.V3Keys(); len(index.Paths) != 6 || len(keys) != 6 {
				t.Errorf("index has %d paths and V3Keys %v, want 6: %v", len(index.Paths), keys, index.Paths)
			}
		},
	}, {
		name: "v3 document with current hash is immutable", path: "/openapi/v3/apis/apps/v1?hash=" + appsHash,
		wantStatus: http.StatusOK, wantType: "application/json",
		wantHeaders: map[string]string{"Cache-Control": "public, immutable", "Etag": `"` + appsHash + `"`},
		check: func(t *testing.T, body []byte) {
			var doc struct{ OpenAPI string }
			if err := json.Unmarshal(body, &doc); err != nil || doc.OpenAPI != "3.0.0" {
				t.Errorf("v3 document: openapi %q, err %v", doc.OpenAPI, err)
			}
		},
	}, {
		name: "v3 document with stale hash redirects", path: "/openapi/v3/apis/apps/v1?hash=0123",
		wantStatus:  http.StatusMovedPermanently,
		wantHeaders: map[string]string{"Location": "/openapi/v3/apis/apps/v1?hash=" + appsHash},
	}, {
		name: "v3 document without hash must be revalidated", path: "/openapi/v3/api/v1",
		wantStatus: http.StatusOK, wantType: "application/json",
		wantHeaders: map[string]string{"Cache-Control": "no-cache, private", "Expires": ""},
	}, {
		name: "v3 document not modified", path: "/openapi/v3/apis/apps/v1",
		header:     map[string]string{"If-None-Match": `"` + appsHash + `"`},
		wantStatus: http.StatusNotModified,
	}, {
		name: "v3 unknown group version", path: "/openapi/v3/apis/batch/v1",
		wantStatus: http.StatusNotFound,
	}, {
		name: "v3 as protobuf", path: "/openapi/v3/apis/apps/v1?hash=" + appsHash,
		header:     map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"},
		wantStatus: http.StatusOK, wantType: "application/com.github.proto-openapi.spec.v3.v1.0+protobuf",
		wantHeaders: map[string]string{"Cache-Control": "public, immutable", "Etag": `"` + appsHash + `"`},
		check: func(t *testing.T, body []byte) {
			var doc openapiv3.Document
			if err := proto.Unmarshal(body, &doc); err != nil || doc.Openapi != "3.0.0" {
				t.Errorf("v3 protobuf: openapi %q, err %v", doc.Openapi, err)
			}
			if doc.GetComponents().GetSchemas() == nil || len(doc.GetComponents().GetSchemas().GetAdditionalProperties()) == 0 {
				t.Error("v3 protobuf has no schemas")
			}
		},
	}, {
		name: "v3 unacceptable type", path: "/openapi/v3/apis/apps/v1",
		header:     map[string]string{"Accept": "text/html"},
		wantStatus: http.StatusNotAcceptable,
	}, {
		name: "unknown path", path: "/openapi/v4",
		wantStatus: http.StatusNotFound,
	}, {
		name: "write method", method: http.MethodPost, path: "/openapi/v2",
		wantStatus: http.StatusMethodNotAllowed, wantHeaders: map[string]string{"Allow": "GET, HEAD"},
	}, {
		name: "HEAD has headers and no body", method: http.MethodHead, path: "/openapi/v2",
		wantStatus: http.StatusOK, wantType: "application/json",
		check: func(t *testing.T, body []byte) {
			if len(body) != 0 {
				t.Errorf("HEAD returned %d bytes", len(body))
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req := httptest.NewRequest(method, tt.path, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			docs.ServeHTTP(rec, req)
			res := rec.Result()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", res.StatusCode, tt.wantStatus, truncate(string(body), 200))
			}
			if tt.wantType != "" {
				if got := res.Header.Get("Content-Type"); got != tt.wantType {
					t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
				}
			}
			for k, want := range tt.wantHeaders {
				if got := res.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if tt.check != nil {
				tt.check(t, body)
			}
		})
	}
}

func TestHashedURLExpiresInAYear(t *testing.T) {
	docs := buildTestDocuments(t)
	req := httptest.NewRequest(http.MethodGet, "/openapi/v3/api/v1?hash="+docs.v3["api/v1"].etag, nil)
	rec := httptest.NewRecorder()
	docs.ServeHTTP(rec, req)
	expires, err := http.ParseTime(rec.Header().Get("Expires"))
	if err != nil {
		t.Fatalf("Expires %q: %v", rec.Header().Get("Expires"), err)
	}
	if days := time.Until(expires).Hours() / 24; days < 364 || days > 367 {
		t.Errorf("Expires is %.0f days away, want a year", days)
	}
}

// TestProtobufFormsAreBuiltOnDemand checks that the protobuf forms cost nothing until
// asked for, and are built once.
func TestProtobufFormsAreBuiltOnDemand(t *testing.T) {
	docs := buildTestDocuments(t)
	fetch := func(path, accept string) []byte {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		docs.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
		return rec.Body.Bytes()
	}
	jsonOnly := docs.Size()
	first := fetch("/openapi/v2", mediaProtoV2Deprecated)
	withV2 := docs.Size()
	if withV2 <= jsonOnly {
		t.Errorf("Size = %d after serving v2 protobuf, was %d", withV2, jsonOnly)
	}
	if again := fetch("/openapi/v2", mediaProtoV2); !bytes.Equal(first, again) || docs.Size() != withV2 {
		t.Errorf("second v2 protobuf request differs or grew the documents (%d -> %d)", withV2, docs.Size())
	}
	fetch("/openapi/v3/api/v1", mediaProtoV3)
	if docs.Size() <= withV2 {
		t.Errorf("Size = %d after serving a v3 protobuf, was %d", docs.Size(), withV2)
	}
}
