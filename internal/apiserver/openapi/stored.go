package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// storedDoc is one serialized document. It is kept gzip-compressed: the documents
// are large and repetitive (compressing shrinks them about tenfold), and the Go
// clients that read them all accept gzip, so most requests are served as stored.
type storedDoc struct {
	gz           []byte
	size         int    // length of the uncompressed document
	etag         string // upstream's form: the SHA-512 of the uncompressed bytes in upper-case hex
	lastModified time.Time
}

// newStoredDoc compresses data; an empty etag is computed from data.
func newStoredDoc(data []byte, etag string, now time.Time) (storedDoc, error) {
	if etag == "" {
		etag = fmt.Sprintf("%X", sha512.Sum512(data))
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return storedDoc{}, err
	}
	if _, err := zw.Write(data); err != nil {
		return storedDoc{}, err
	}
	if err := zw.Close(); err != nil {
		return storedDoc{}, err
	}
	return storedDoc{gz: bytes.Clone(buf.Bytes()), size: len(data), etag: etag, lastModified: now}, nil
}

// bytes returns the uncompressed document.
func (d storedDoc) bytes() ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(d.gz))
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, d.size)
	buf := bytes.NewBuffer(out)
	if _, err := io.Copy(buf, zr); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, header := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(header, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
