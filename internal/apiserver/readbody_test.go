package apiserver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestReadBodyWhateverTheAnnouncedLength: the body read is the body sent, whether the
// request announced its length, a shorter or longer one than it sent, or none.
func TestReadBodyWhateverTheAnnouncedLength(t *testing.T) {
	for _, size := range []int{0, 1, 511, 512, 513, 1232, 4096, 100000} {
		body := bytes.Repeat([]byte("x"), size)
		for _, announced := range []int64{-1, 0, int64(size), int64(size) / 2, int64(size) + 7} {
			r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/pods", bytes.NewReader(body))
			r.ContentLength = announced
			// One byte at a time, so every read of the loop runs.
			r.Body = io.NopCloser(onebyte{bytes.NewReader(body)})
			got, err := readBody(r)
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("%d bytes announced as %d: read %d bytes, err %v", size, announced, len(got), err)
			}
		}
	}
}

func TestReadBodyRefusesTooLargeAndBrokenBodies(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	r.ContentLength = maxBodyBytes + 1
	if _, err := readBody(r); !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("announced over the limit: %v, want 413", err)
	}
	r = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, maxBodyBytes+1)))
	r.ContentLength = 100
	if _, err := readBody(r); !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("sent over the limit, announced short: %v, want 413", err)
	}
	r = httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader("{"), failing{}))
	r.ContentLength = 10
	if _, err := readBody(r); !apierrors.IsBadRequest(err) {
		t.Errorf("a body that breaks off: %v, want 400", err)
	}
}

type onebyte struct{ r io.Reader }

func (o onebyte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
