package compression

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// gunzip decodes a gzip body, checking its CRC and length as any client does.
func gunzip(t *testing.T, body []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("gzip header: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip body: %v", err)
	}
	return out
}

// randomText is compressible text of n bytes.
func randomText(r *rand.Rand, n int) []byte {
	words := []string{"metadata", "name", "namespace", "spec", "containers", "image", "status", "{", "}", ":", ",", `"`}
	var b []byte
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
		b = fmt.Appendf(b, "%d", r.IntN(100))
	}
	return b[:n]
}

func TestStreamOfRawBytesAndSegmentsIsOneGzipBody(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		var want []byte
		var body bytes.Buffer
		s := newStream(&body)
		for range r.IntN(8) {
			p := randomText(r, r.IntN(70000))
			want = append(want, p...)
			if r.IntN(2) == 0 {
				if _, err := s.Write(p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			seg, err := compress(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.WriteSegment(seg); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := gunzip(t, body.Bytes()); !bytes.Equal(got, want) {
			t.Fatalf("trial %d: decoded %d bytes, want %d", trial, len(got), len(want))
		}
	}
}

// compress returns p as a Segment of its own.
func compress(p []byte) (Segment, error) {
	var b segmentBuilder
	b.Write(p)
	return b.Segment()
}
