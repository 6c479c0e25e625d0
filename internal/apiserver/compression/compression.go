// Package compression gzips large API responses for clients that accept gzip, as
// upstream's kube-apiserver does (the APIResponseCompression feature, on by default):
// a response body larger than 128 KiB is compressed at gzip level 1 when the request's
// Accept-Encoding lists gzip, with Content-Encoding: gzip and Vary: Accept-Encoding;
// smaller bodies, and every body of a client that does not ask, go out as they are.
// client-go asks (Go's transport adds Accept-Encoding: gzip and decompresses), so a
// list of thousands of objects crosses the wire at a fraction of its size.
//
// Upstream decides per encoded object (its deferredResponseWriter buffers a streamed
// list's output until it passes the threshold); a Writer decides per response body in
// the same way: it holds the body back until it passes the threshold or ends.
//
// Upstream compresses every large list afresh. A list served from the watch cache
// here is written instead from runs of its items compressed once and kept (Chunks):
// deflate blocks placed side by side in one gzip Stream, whose trailer's CRC is
// combined from the runs' own, so listing 10,000 pods again is mostly copying.
package compression

import (
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
)

// Threshold is the body size above which a response is compressed (upstream's
// defaultGzipThresholdBytes).
const Threshold = 128 << 10

// Level is upstream's gzip level: 1 costs far less CPU than the default for a
// compression ratio within 1.1–1.5× of it (kubernetes/kubernetes#112296).
const Level = gzip.BestSpeed

// Accepts reports whether the request asks for gzip the way upstream recognises it:
// one of Accept-Encoding's comma-separated tokens is exactly "gzip".
func Accepts(r *http.Request) bool {
	for _, value := range r.Header.Values("Accept-Encoding") {
		for token := range strings.SplitSeq(value, ",") {
			if strings.TrimSpace(token) == "gzip" {
				return true
			}
		}
	}
	return false
}

var gzipWriters = sync.Pool{New: func() any {
	gw, err := gzip.NewWriterLevel(nil, Level)
	if err != nil {
		panic(err) // Level is valid.
	}
	return gw
}}

// Writer is an http.ResponseWriter that gzips the body if it grows past Threshold.
// Until then it holds back the status and the body; Close (or Flush) sends what it
// holds. The handler must call Close when it is done.
type Writer struct {
	w       http.ResponseWriter
	code    int
	held    *[]byte // nil: nothing held
	decided bool
	gz      *gzip.Writer
	stream  *Stream // set by Gzip
	err     error
}

// NewWriter wraps w. Call Close after the handler returns.
func NewWriter(w http.ResponseWriter) *Writer { return &Writer{w: w} }

// Header is the response's header.
func (c *Writer) Header() http.Header { return c.w.Header() }

// WriteHeader records the status; it is sent with the first bytes of the body.
func (c *Writer) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		// Informational responses go out at once and are not the response's status.
		c.w.WriteHeader(code)
		return
	}
	if c.code == 0 {
		c.code = code // a second call is superfluous, as net/http says
	}
}

// Write holds p back until the body passes Threshold, then compresses everything.
func (c *Writer) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.decided {
		return c.send(p)
	}
	if c.held == nil && len(p) > Threshold {
		c.start(true, false)
		return c.send(p)
	}
	if c.held == nil {
		c.held = heldBuffers.Get().(*[]byte)
	}
	*c.held = append(*c.held, p...)
	if len(*c.held) > Threshold {
		c.start(true, false)
		_, err := c.send(*c.held)
		c.releaseHeld()
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// heldBuffers keep what writers hold back between responses: nearly every response
// is held whole (most are under Threshold), and the writer below copies it when sent.
var heldBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledHeld is the largest held buffer kept for reuse (an object's response; a
// body that grew to Threshold does not stay in memory).
const maxPooledHeld = 64 << 10

// releaseHeld gives the held buffer back, once what it held was sent.
func (c *Writer) releaseHeld() {
	if c.held == nil {
		return
	}
	if cap(*c.held) <= maxPooledHeld {
		*c.held = (*c.held)[:0]
		heldBuffers.Put(c.held)
	}
	c.held = nil
}

// Flush sends what is held uncompressed if the body has not passed Threshold yet (a
// handler that flushes wants its bytes out now), then flushes the connection.
func (c *Writer) Flush() {
	if !c.decided {
		c.commitHeld()
	}
	if c.gz != nil {
		if err := c.gz.Flush(); err != nil {
			c.err = err
		}
	}
	if c.stream != nil {
		if err := c.stream.Flush(); err != nil {
			c.err = err
		}
	}
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Gzip sends the status with the compression headers now, whatever the body's size,
// and returns the stream the body is to be written to, for a handler that knows its
// body passes Threshold and can give some of it compressed already (Segments). It
// returns nil once anything was sent. Write then compresses into the same stream.
func (c *Writer) Gzip() *Stream {
	if c.decided || (c.held != nil && len(*c.held) > 0) {
		return nil
	}
	c.start(true, true)
	c.stream = newStream(c.w)
	return c.stream
}

// Close ends the body: what is held goes out as it is (it never passed Threshold),
// or the gzip stream is finished.
func (c *Writer) Close() error {
	if c.stream != nil {
		if err := c.stream.Close(); err != nil && c.err == nil {
			c.err = err
		}
		c.stream = nil
		return c.err
	}
	if !c.decided {
		if c.code == 0 && (c.held == nil || len(*c.held) == 0) {
			// Nothing was written: leave the response to whoever writes it next.
			c.releaseHeld()
			return c.err
		}
		c.commitHeld()
		return c.err
	}
	if c.gz != nil {
		if err := c.gz.Close(); err != nil && c.err == nil {
			c.err = err
		}
		c.gz.Reset(nil)
		gzipWriters.Put(c.gz)
		c.gz = nil
	}
	return c.err
}

// Unwrap is the wrapped writer, for http.ResponseController.
func (c *Writer) Unwrap() http.ResponseWriter { return c.w }

func (c *Writer) commitHeld() {
	c.start(false, false)
	if c.held != nil && len(*c.held) > 0 {
		_, _ = c.send(*c.held)
	}
	c.releaseHeld()
}

// start sends the status, with the compression headers if compress, and a gzip
// writer for the body unless the caller writes the body as a Stream.
func (c *Writer) start(compress, stream bool) {
	c.decided = true
	if compress {
		h := c.w.Header()
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		// A length a handler set is the uncompressed body's.
		h.Del("Content-Length")
		if !stream {
			c.gz = gzipWriters.Get().(*gzip.Writer)
			c.gz.Reset(c.w)
		}
	}
	code := c.code
	if code == 0 {
		code = http.StatusOK
	}
	c.code = code
	c.w.WriteHeader(code)
}

func (c *Writer) send(p []byte) (int, error) {
	var n int
	var err error
	switch {
	case c.stream != nil:
		n, err = c.stream.Write(p)
	case c.gz != nil:
		n, err = c.gz.Write(p)
	default:
		n, err = c.w.Write(p)
	}
	if err != nil {
		c.err = err
	}
	return n, err
}
