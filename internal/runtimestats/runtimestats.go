// Package runtimestats reads the Go runtime's own metrics (runtime/metrics) by name, as
// the unsigned integers the heap's and the collector's figures are: for the packages
// that steer the process's memory from them (idlemem, gcpace).
package runtimestats

import "runtime/metrics"

// Reader reads one fixed set of metrics, reusing its samples.
type Reader struct {
	samples []metrics.Sample
}

// New returns a Reader of the named metrics.
func New(names ...string) *Reader {
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	return &Reader{samples: samples}
}

// Read returns each metric's value, in the order New was given them; a metric this Go
// does not know, or that is not an unsigned integer, reads as 0.
func (r *Reader) Read() []uint64 {
	metrics.Read(r.samples)
	out := make([]uint64, len(r.samples))
	for i, s := range r.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			out[i] = s.Value.Uint64()
		}
	}
	return out
}
