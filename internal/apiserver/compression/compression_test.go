package compression

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		header []string
		want   bool
	}{
		{nil, false},
		{[]string{"gzip"}, true},
		{[]string{"deflate, gzip"}, true},
		{[]string{" gzip ,br"}, true},
		{[]string{"identity"}, false},
		{[]string{"br", "gzip"}, true},
		{[]string{"x-gzip"}, false},
		// Upstream compares whole tokens: a token with parameters is not "gzip".
		{[]string{"gzip;q=1.0"}, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for _, v := range tc.header {
			r.Header.Add("Accept-Encoding", v)
		}
		if got := Accepts(r); got != tc.want {
			t.Errorf("Accept-Encoding %q: Accepts = %v, want %v", tc.header, got, tc.want)
		}
	}
}

// body is n bytes that compress well, as API objects do.
func body(n int) []byte {
	return bytes.Repeat([]byte(`{"kind":"Pod","apiVersion":"v1"},`), n/33+1)[:n]
}

func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []int // sizes of the handler's writes
		code   int
		flush  bool
		gzip   bool
	}{
		{name: "small body stays plain", writes: []int{100}, code: 200},
		{name: "exactly the threshold stays plain", writes: []int{Threshold}, code: 200},
		{name: "one write past the threshold", writes: []int{Threshold + 1}, code: 200, gzip: true},
		{name: "streamed in small writes past the threshold", writes: []int{1, 4, 64 << 10, 64 << 10, 64 << 10}, code: 200, gzip: true},
		{name: "streamed but small", writes: []int{1, 4, 1000}, code: 201},
		{name: "error status kept", writes: []int{Threshold * 2}, code: 500, gzip: true},
		{name: "flushed before the threshold stays plain", writes: []int{10, Threshold * 2}, code: 200, flush: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := NewWriter(rec)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "999")
			w.WriteHeader(tc.code)
			var want bytes.Buffer
			for i, n := range tc.writes {
				p := body(n)
				want.Write(p)
				if _, err := w.Write(p); err != nil {
					t.Fatal(err)
				}
				if i == 0 && tc.flush {
					w.Flush()
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			res := rec.Result()
			if res.StatusCode != tc.code {
				t.Errorf("status %d, want %d", res.StatusCode, tc.code)
			}
			if got := res.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			got := rec.Body.Bytes()
			if tc.gzip {
				if res.Header.Get("Content-Encoding") != "gzip" || res.Header.Get("Vary") != "Accept-Encoding" {
					t.Errorf("headers %v, want Content-Encoding: gzip and Vary: Accept-Encoding", res.Header)
				}
				if res.Header.Get("Content-Length") != "" {
					t.Errorf("Content-Length %q kept on a compressed body", res.Header.Get("Content-Length"))
				}
				zr, err := gzip.NewReader(bytes.NewReader(got))
				if err != nil {
					t.Fatal(err)
				}
				if got, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
				if rec.Body.Len() >= want.Len()/4 {
					t.Errorf("compressed to %d of %d bytes", rec.Body.Len(), want.Len())
				}
			} else if res.Header.Get("Content-Encoding") != "" || res.Header.Get("Vary") != "" {
				t.Errorf("headers %v on an uncompressed body", res.Header)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("body of %d bytes differs from the %d written", len(got), want.Len())
			}
		})
	}
}

func TestWriterWithoutWritesLeavesTheResponseAlone(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := NewWriter(rec).Close(); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Flushed || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Errorf("recorder touched: code %d, header %v, %d bytes", rec.Code, rec.Header(), rec.Body.Len())
	}
}

func TestWriterStatusWithoutBody(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.WriteHeader(http.StatusNoContent)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusNoContent {
		t.Errorf("status %d, want 204", rec.Code)
	}
}
