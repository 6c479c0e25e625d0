// Package apimetrics reads an apiserver's own request metrics (upstream's
// apiserver_request_duration_seconds and apiserver_request_total, which mizzen serves
// with the same names and labels) from /metrics, so a benchmark can say which calls a
// run made and how long they took, as upstream's SLOs count them, on either server.
package apimetrics

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// Metrics is what one scrape of an apiserver's /metrics gives.
type Metrics struct {
	// Latency is what upstream's API call latency SLO is measured from:
	// apiserver_request_sli_duration_seconds (the time without waits for a priority
	// level's seat and for admission webhooks) where the server serves it, else
	// apiserver_request_duration_seconds.
	Latency Histograms
	// Total is apiserver_request_duration_seconds: the whole time, waits included.
	Total    Histograms
	Requests RequestCounts
	// Rejected counts the requests priority and fairness turned away (429), by
	// "priority level/reason" (apiserver_flowcontrol_rejected_requests_total).
	Rejected map[string]float64
}

// Scrape reads the apiserver's request latency histograms and request counts.
func Scrape(ctx context.Context, c kubernetes.Interface) (Metrics, error) {
	body, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Metrics{}, fmt.Errorf("GET /metrics: %w", err)
	}
	total, err := ParseHistograms(string(body))
	if err != nil {
		return Metrics{}, err
	}
	sli, err := parseHistograms(string(body), sliMetric)
	if err != nil {
		return Metrics{}, err
	}
	if len(sli) == 0 {
		sli = total
	}
	n, err := ParseRequestCounts(string(body))
	if err != nil {
		return Metrics{}, err
	}
	rejected := map[string]float64{}
	err = eachSample(string(body), "apiserver_flowcontrol_rejected_requests_total{", func(labels map[string]string, value float64) error {
		rejected[labels["priority_level"]+"/"+labels["reason"]] += value
		return nil
	})
	return Metrics{sli, total, n, rejected}, err
}

// Histograms are the apiserver_request_duration_seconds series of one /metrics
// scrape, by call (resource, subresource, verb, scope): cumulative counts per upper
// bound.
type Histograms map[Call]map[float64]float64

// Call is what upstream's API call latency SLO is per.
type Call struct{ Resource, Subresource, Verb, Scope string }

func (c Call) String() string {
	r := c.Resource
	if c.Subresource != "" {
		r += "/" + c.Subresource
	}
	return fmt.Sprintf("%s %s (%s)", c.Verb, r, c.Scope)
}

// Mutating tells the SLO's mutating calls (single objects) from read-only ones.
func (c Call) Mutating() bool {
	switch c.Verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		return true
	}
	return false
}

// Threshold is the SLO's p99 bound for the call: 1 s for mutating calls and reads of
// one object, 5 s for a namespace's lists, 30 s for the cluster's.
func (c Call) Threshold() float64 {
	if !c.Mutating() && c.Scope == "namespace" {
		return 5
	}
	if !c.Mutating() && c.Scope == "cluster" {
		return 30
	}
	return 1
}

// Measured says whether the SLO covers the call: not watches or streams.
func (c Call) Measured() bool {
	switch c.Verb {
	case "WATCH", "WATCHLIST", "CONNECT", "DELETECOLLECTION":
		return false
	}
	return true
}

// ParseHistograms reads the apiserver_request_duration_seconds buckets of a scrape in
// Prometheus' text format, summing over the labels the SLO does not split by (group,
// version, component, dry run).
func ParseHistograms(text string) (Histograms, error) {
	return parseHistograms(text, "apiserver_request_duration_seconds")
}

// sliMetric is the histogram upstream's SLO measurements read (clusterloader2's API
// responsiveness), which leaves out the waits the server imposes on purpose.
const sliMetric = "apiserver_request_sli_duration_seconds"

func parseHistograms(text, metric string) (Histograms, error) {
	h := Histograms{}
	err := eachSample(text, metric+"_bucket{", func(labels map[string]string, value float64) error {
		le, err := strconv.ParseFloat(labels["le"], 64) // "+Inf" parses
		if err != nil {
			return fmt.Errorf("bad le %q", labels["le"])
		}
		c := Call{labels["resource"], labels["subresource"], labels["verb"], labels["scope"]}
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

// RequestCounts are the apiserver_request_total series of one scrape by call, summed
// over status codes and the other labels: every request, watches included.
type RequestCounts map[Call]float64

// ParseRequestCounts reads the apiserver_request_total samples of a scrape.
func ParseRequestCounts(text string) (RequestCounts, error) {
	out := RequestCounts{}
	err := eachSample(text, "apiserver_request_total{", func(labels map[string]string, value float64) error {
		out[Call{labels["resource"], labels["subresource"], labels["verb"], labels["scope"]}] += value
		return nil
	})
	return out, err
}

// Since is the requests made between an earlier scrape and this one, most first.
func (c RequestCounts) Since(before RequestCounts) []CallCount {
	var out []CallCount
	for k, v := range c {
		if n := v - before[k]; n > 0 {
			out = append(out, CallCount{k, n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Call.String() < out[j].Call.String()
	})
	return out
}

// CallCount is how many times one call was made.
type CallCount struct {
	Call  Call
	Count float64
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

// Since is h minus an earlier scrape: the calls made in between.
func (h Histograms) Since(before Histograms) Histograms {
	out := Histograms{}
	for c, buckets := range h {
		out[c] = map[float64]float64{}
		for le, v := range buckets {
			out[c][le] = v - before[c][le]
		}
	}
	return out
}

// Quantile is Prometheus' histogram_quantile: linear within the bucket that holds
// the q-th call; the count of calls is the +Inf bucket.
func Quantile(q float64, buckets map[float64]float64) (value, count float64) {
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

// SLOLine is one call's p99 against its SLO.
type SLOLine struct {
	Call       Call
	P99, Count float64
}

// SLOs are the p99 of every measured call, worst first relative to its threshold.
func (h Histograms) SLOs() []SLOLine {
	var out []SLOLine
	for c, buckets := range h {
		if !c.Measured() {
			continue
		}
		p99, n := Quantile(0.99, buckets)
		if n == 0 {
			continue
		}
		out = append(out, SLOLine{c, p99, n})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].P99/out[i].Call.Threshold(), out[j].P99/out[j].Call.Threshold()
		if a != b {
			return a > b
		}
		return out[i].Call.String() < out[j].Call.String()
	})
	return out
}
