package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// histograms are the apiserver_request_duration_seconds series of one /metrics
// scrape, by call (resource, subresource, verb, scope): cumulative counts per upper
// bound.
type histograms map[call]map[float64]float64

// call is what upstream's API call latency SLO is per.
type call struct{ Resource, Subresource, Verb, Scope string }

func (c call) String() string {
	r := c.Resource
	if c.Subresource != "" {
		r += "/" + c.Subresource
	}
	return fmt.Sprintf("%s %s (%s)", c.Verb, r, c.Scope)
}

// mutating tells the SLO's mutating calls (single objects) from read-only ones.
func (c call) mutating() bool {
	switch c.Verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		return true
	}
	return false
}

// threshold is the SLO's p99 bound for the call: 1 s for mutating calls and reads of
// one object, 5 s for a namespace's lists, 30 s for the cluster's.
func (c call) threshold() float64 {
	if !c.mutating() && c.Scope == "namespace" {
		return 5
	}
	if !c.mutating() && c.Scope == "cluster" {
		return 30
	}
	return 1
}

// measured says whether the SLO covers the call: not watches or streams.
func (c call) measured() bool {
	switch c.Verb {
	case "WATCH", "WATCHLIST", "CONNECT", "DELETECOLLECTION":
		return false
	}
	return true
}

// parseHistograms reads the apiserver_request_duration_seconds buckets of a scrape in
// Prometheus' text format, summing over the labels the SLO does not split by (group,
// version, component, dry run).
func parseHistograms(text string) (histograms, error) {
	h := histograms{}
	err := eachSample(text, "apiserver_request_duration_seconds_bucket{", func(labels map[string]string, value float64) error {
		le, err := strconv.ParseFloat(labels["le"], 64) // "+Inf" parses
		if err != nil {
			return fmt.Errorf("bad le %q", labels["le"])
		}
		c := call{labels["resource"], labels["subresource"], labels["verb"], labels["scope"]}
		if h[c] == nil {
			h[c] = map[float64]float64{}
		}
		h[c][le] += value
		return nil
	})
	return h, err
}

// eachSample calls f with the labels and value of every line of a Prometheus text
// scrape that starts with prefix (a metric name and "{").
func eachSample(text, prefix string, f func(labels map[string]string, value float64) error) error {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			return fmt.Errorf("bad line %q", line)
		}
		labels, err := parseLabels(line[len(prefix):end])
		if err != nil {
			return fmt.Errorf("%w in %q", err, line)
		}
		value, err := strconv.ParseFloat(strings.Fields(line[end+1:])[0], 64)
		if err != nil {
			return fmt.Errorf("bad value in %q", line)
		}
		if err := f(labels, value); err != nil {
			return fmt.Errorf("%w in %q", err, line)
		}
	}
	return nil
}

// requestCounts are the apiserver_request_total series of one scrape by call, summed
// over status codes and the other labels: every request, watches included.
type requestCounts map[call]float64

func parseRequestCounts(text string) (requestCounts, error) {
	out := requestCounts{}
	err := eachSample(text, "apiserver_request_total{", func(labels map[string]string, value float64) error {
		out[call{labels["resource"], labels["subresource"], labels["verb"], labels["scope"]}] += value
		return nil
	})
	return out, err
}

// since is the requests made between an earlier scrape and this one, most first.
func (c requestCounts) since(before requestCounts) []callCount {
	var out []callCount
	for k, v := range c {
		if n := v - before[k]; n > 0 {
			out = append(out, callCount{k, n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].count != out[j].count {
			return out[i].count > out[j].count
		}
		return out[i].call.String() < out[j].call.String()
	})
	return out
}

type callCount struct {
	call  call
	count float64
}

// parseLabels reads `a="x",b="y"` with Prometheus' escapes.
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return nil, fmt.Errorf("bad labels")
		}
		name := s[:eq]
		var v strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				if s[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, fmt.Errorf("unterminated label")
		}
		out[name] = v.String()
		s = strings.TrimPrefix(s[i+1:], ",")
	}
	return out, nil
}

// since is h minus an earlier scrape: the calls made in between.
func (h histograms) since(before histograms) histograms {
	out := histograms{}
	for c, buckets := range h {
		out[c] = map[float64]float64{}
		for le, v := range buckets {
			out[c][le] = v - before[c][le]
		}
	}
	return out
}

// quantile is Prometheus' histogram_quantile: linear within the bucket that holds
// the q-th call; the count of calls is the +Inf bucket.
func quantile(q float64, buckets map[float64]float64) (value, count float64) {
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0, 0
	}
	count = buckets[bounds[len(bounds)-1]]
	if count == 0 {
		return 0, 0
	}
	rank := q * count
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		if buckets[le] >= rank {
			if math.IsInf(le, 1) {
				return prevBound, count // beyond the last bound: the last bound, as Prometheus
			}
			if buckets[le] == prevCount {
				return le, count
			}
			return prevBound + (le-prevBound)*(rank-prevCount)/(buckets[le]-prevCount), count
		}
		prevBound, prevCount = le, buckets[le]
	}
	return prevBound, count
}

// sloLine is one call's p99 against its SLO.
type sloLine struct {
	call       call
	p99, count float64
}

// slos are the p99 of every measured call, worst first relative to its threshold.
func (h histograms) slos() []sloLine {
	var out []sloLine
	for c, buckets := range h {
		if !c.measured() {
			continue
		}
		p99, n := quantile(0.99, buckets)
		if n == 0 {
			continue
		}
		out = append(out, sloLine{c, p99, n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].p99/out[i].call.threshold(), out[j].p99/out[j].call.threshold()
		if a != b {
			return a > b
		}
		return out[i].call.String() < out[j].call.String()
	})
	return out
}
