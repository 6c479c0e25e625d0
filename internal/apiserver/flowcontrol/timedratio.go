package flowcontrol

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// timedRatioVec is a timing histogram by labels, exposed as upstream's
// TimingRatioHistogram and component-base's timing histograms are: each bucket counts
// the nanoseconds its series' value spent in it, the sum is the value integrated
// over nanoseconds, the count every nanosecond observed. A change takes its time from
// the caller, who has read the clock already (a level does, under its lock): the
// timing histograms of component-base read it on every change, and a request makes
// several.
type timedRatioVec struct {
	desc   *prometheus.Desc
	bounds []float64
	clock  func() time.Time // what a scrape accounts up to

	mu     sync.Mutex
	series map[string]*timedRatio // by their label values, joined
}

// newTimedRatioVec describes the histogram; help is given the prefix component-base
// gives its timing histograms.
func newTimedRatioVec(clock func() time.Time, name, help string, bounds []float64, constLabels prometheus.Labels, labels ...string) *timedRatioVec {
	return &timedRatioVec{
		desc:   prometheus.NewDesc(name, "EXPERIMENTAL: "+help, labels, constLabels),
		bounds: bounds,
		clock:  clock,
		series: map[string]*timedRatio{},
	}
}

// timedRatio is one series: its value, since when it has held it, and the time
// every value before spent in each bucket.
type timedRatio struct {
	vec    *timedRatioVec
	values []string

	mu        sync.Mutex
	value     float64
	since     time.Time
	ns        []uint64 // by bucket, the last for +Inf
	sum, comp float64  // the sum, compensated (Kahan): it grows by 1e9 a second
}

// with returns the series of the label values, made at value 0 now if new.
func (v *timedRatioVec) with(values ...string) *timedRatio {
	key := strings.Join(values, "\x00")
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.series[key]; s != nil {
		return s
	}
	s := &timedRatio{vec: v, values: slices.Clone(values), since: v.clock(), ns: make([]uint64, len(v.bounds)+1)}
	v.series[key] = s
	return s
}

// set gives the series its value from now on.
func (s *timedRatio) set(now time.Time, value float64) {
	s.mu.Lock()
	s.setLocked(now, value)
	s.mu.Unlock()
}

// setLocked is set for a caller holding s.mu (a RatioGauge, whose count it guards).
func (s *timedRatio) setLocked(now time.Time, value float64) {
	s.advanceLocked(now)
	s.value = value
}

// advanceLocked counts the time since the last change (or scrape) at the value.
func (s *timedRatio) advanceLocked(now time.Time) {
	d := now.Sub(s.since)
	if d <= 0 {
		return
	}
	s.since = now
	s.ns[sort.SearchFloat64s(s.vec.bounds, s.value)] += uint64(d)
	y := float64(d)*s.value - s.comp
	t := s.sum + y
	s.comp = (t - s.sum) - y
	s.sum = t
}

// Describe implements prometheus.Collector.
func (v *timedRatioVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector: every series, up to now.
func (v *timedRatioVec) Collect(ch chan<- prometheus.Metric) {
	now := v.clock()
	v.mu.Lock()
	series := make([]*timedRatio, 0, len(v.series))
	for _, s := range v.series {
		series = append(series, s)
	}
	v.mu.Unlock()
	for _, s := range series {
		s.mu.Lock()
		s.advanceLocked(now)
		buckets := make(map[float64]uint64, len(v.bounds))
		var count uint64
		for i, bound := range v.bounds {
			count += s.ns[i]
			buckets[bound] = count
		}
		count += s.ns[len(v.bounds)]
		sum := s.sum
		s.mu.Unlock()
		m, err := prometheus.NewConstHistogram(v.desc, count, sum, buckets, s.values...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(v.desc, err)
			continue
		}
		ch <- m
	}
}
