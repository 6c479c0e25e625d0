package compression

import (
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"io"
	"sync"
)

// Segment is a run of bytes compressed earlier: deflate blocks, none of them final,
// ending on a byte boundary (as a sync flush leaves them) and referring to nothing
// before their start, so it can be placed anywhere in a deflate stream. CRC and Len
// are those of the uncompressed bytes.
type Segment struct {
	Data []byte
	CRC  uint32
	Len  uint64
}

// gzipHeader is a gzip member's header: deflate, no flags, no time, unknown OS (as
// Go's gzip writer leaves a header it was given nothing for).
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}

var flateWriters = sync.Pool{New: func() any {
	fw, err := flate.NewWriter(nil, Level)
	if err != nil {
		panic(err) // Level is valid.
	}
	return fw
}}

// getFlate returns a pooled compressor writing to w, with no history.
func getFlate(w io.Writer) *flate.Writer {
	fw := flateWriters.Get().(*flate.Writer)
	fw.Reset(w)
	return fw
}

// putFlate gives a compressor back to the pool.
func putFlate(fw *flate.Writer) {
	fw.Reset(nil)
	flateWriters.Put(fw)
}

// Stream writes one gzip member from raw bytes, compressed as they come, and from
// Segments compressed earlier, in any order: a body that is mostly segments costs
// copying them rather than compressing it again.
type Stream struct {
	w   io.Writer
	fw  *flate.Writer // compresses raw bytes; nil until the first
	raw bool          // fw holds bytes not yet flushed to w
	// stale: a segment was written since fw last started, so fw's history is not
	// what precedes its next bytes in the stream and it must start afresh.
	stale bool
	crc   uint32
	size  uint64
	err   error
}

// newStream writes the gzip header to w and returns the stream.
func newStream(w io.Writer) *Stream {
	s := &Stream{w: w}
	_, s.err = w.Write(gzipHeader)
	return s
}

// compressor returns the compressor for the stream's next raw bytes, started afresh
// if a segment came since it last did.
func (s *Stream) compressor() *flate.Writer {
	if s.fw == nil {
		s.fw = getFlate(s.w)
	} else if s.stale {
		s.fw.Reset(s.w)
	}
	s.stale = false
	return s.fw
}

// Write compresses p into the stream.
func (s *Stream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	fw := s.compressor()
	s.crc = crc32.Update(s.crc, crc32.IEEETable, p)
	s.size += uint64(len(p))
	n, err := fw.Write(p)
	s.raw = true
	if err != nil {
		s.err = err
	}
	return n, err
}

// WriteSegment places seg in the stream as it is.
func (s *Stream) WriteSegment(seg Segment) error {
	if s.err != nil {
		return s.err
	}
	if s.raw {
		// The raw bytes' blocks end on a byte boundary before the segment's begin.
		if s.err = s.fw.Flush(); s.err != nil {
			return s.err
		}
		s.raw = false
	}
	s.stale = true
	if _, s.err = s.w.Write(seg.Data); s.err != nil {
		return s.err
	}
	s.crc = crcCombine(s.crc, seg.CRC, seg.Len)
	s.size += seg.Len
	return nil
}

// Flush sends what the stream holds.
func (s *Stream) Flush() error {
	if s.err == nil && s.raw {
		s.err = s.fw.Flush()
		s.raw = false
	}
	return s.err
}

// Close ends the deflate stream with a final block and writes the gzip trailer.
func (s *Stream) Close() error {
	if s.err == nil {
		s.err = s.compressor().Close() // the final (empty) block, after whatever is pending
	}
	if s.err == nil {
		var trailer [8]byte
		binary.LittleEndian.PutUint32(trailer[:4], s.crc)
		binary.LittleEndian.PutUint32(trailer[4:], uint32(s.size)) // ISIZE is modulo 2^32
		_, s.err = s.w.Write(trailer[:])
	}
	if s.fw != nil {
		putFlate(s.fw)
		s.fw = nil
	}
	return s.err
}

// segmentBuilder compresses what is written to it into one Segment.
type segmentBuilder struct {
	buf bytesBuffer
	fw  *flate.Writer
	crc uint32
	n   uint64
	err error
}

// compressor returns the segment's compressor, started on the first use.
func (b *segmentBuilder) compressor() *flate.Writer {
	if b.fw == nil {
		b.fw = getFlate(&b.buf)
	}
	return b.fw
}

func (b *segmentBuilder) Write(p []byte) {
	if b.err != nil {
		return
	}
	b.crc = crc32.Update(b.crc, crc32.IEEETable, p)
	b.n += uint64(len(p))
	_, b.err = b.compressor().Write(p)
}

// history gives the compressor p as the bytes before the segment, to refer back to;
// p is not part of the segment. It must come before the first Write.
func (b *segmentBuilder) history(p []byte) {
	if b.err != nil || b.n != 0 {
		return
	}
	fw := b.compressor()
	// Level 1's compressor matches against its previous block, which a flush keeps:
	// p compressed and flushed is that block, and its output is dropped. (Level 1
	// ignores a dictionary given to flate.NewWriterDict.)
	if _, b.err = fw.Write(p); b.err == nil {
		b.err = fw.Flush()
	}
	b.buf = b.buf[:0]
}

// Segment ends the run with a sync flush (so it ends on a byte boundary and in no
// final block) and returns it; the builder can then be used again.
func (b *segmentBuilder) Segment() (Segment, error) {
	seg := Segment{CRC: b.crc, Len: b.n}
	if b.fw != nil {
		if b.err == nil {
			b.err = b.fw.Flush()
		}
		putFlate(b.fw)
		b.fw = nil
	}
	seg.Data = append([]byte(nil), b.buf...)
	err := b.err
	*b = segmentBuilder{buf: b.buf[:0]}
	return seg, err
}

// bytesBuffer is an io.Writer appending to a slice.
type bytesBuffer []byte

func (b *bytesBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}
