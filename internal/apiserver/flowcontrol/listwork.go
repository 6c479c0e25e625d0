package flowcontrol

import (
	"math"
	"net/url"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Upstream's list work estimate (kube-apiserver v1.37, its default size-based one): a
// list takes a seat per 100 kB of objects it is expected to hold in memory at once,
// from the resource's object count and average stored size; a list the watch cache
// serves (it streams) counts at most 1 MB; a level's lists take at most its maximum
// seats, and never more than 100.
const (
	bytesPerSeat = 100_000
	// cacheListMaxBytes bounds what a list served from the watch cache counts.
	cacheListMaxBytes = 1_000_000
	// unknownObjectBytes is the size assumed of objects whose size is not known.
	unknownObjectBytes = 1_500_000
	// maxListSeats is the most seats a list takes.
	maxListSeats = 100
	// levelMaxSeatsFraction of a level's nominal seats (at most its nominal seats
	// over its hand size) is the most one request of the level takes.
	levelMaxSeatsFraction = 0.15
)

// ListSeats estimates the seats a list of a resource takes (1 to 100), before its
// level's cap:
// count and averageBytes are the resource's objects and their average size in
// storage (counted false: not known, and the list takes one seat), query the list's
// options. As upstream's, a list naming one object (a metadata.name field selector)
// holds one; one the watch cache serves holds at most what the limit lets through;
// one read from storage with a selector reads at least half the objects; options
// that do not parse cost the most.
func ListSeats(count, averageBytes int64, counted bool, query url.Values) int {
	opts, ok := parseListOptions(query)
	if !ok {
		return maxListSeats
	}
	return listSeats(count, averageBytes, counted, opts, listServedFromCache(opts), namesOne(opts.FieldSelector))
}

// WatchSeats estimates the seats a watch holds while it sends its initial events,
// before its level's cap. As upstream's (whose WatchList feature, on since 1.34, sends
// watches to the list estimate): a watch that starts with the current state
// (sendInitialEvents, or no or a zero resourceVersion) costs what a list served by
// the watch cache would; one from a given version, one seat. named: the watch is of
// one object.
func WatchSeats(count, averageBytes int64, counted, named bool, query url.Values) int {
	opts, ok := parseListOptions(query)
	if !ok {
		return maxListSeats
	}
	initial, _ := strconv.ParseBool(query.Get("sendInitialEvents"))
	if !initial && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		return 1
	}
	return listSeats(count, averageBytes, counted, opts, true, named || namesOne(opts.FieldSelector))
}

// listSeats is the estimate of a list or watch of the given options, served from the
// watch cache or from storage, naming one object or not.
func listSeats(count, averageBytes int64, counted bool, opts metav1.ListOptions, fromCache, named bool) int {
	if !counted {
		return 1
	}
	if averageBytes <= 0 && count != 0 {
		averageBytes = unknownObjectBytes
	}
	limited := count
	if opts.Limit > 0 && opts.Limit < limited {
		limited = opts.Limit
	}
	var objects int64
	switch {
	case named:
		objects = 1
	case fromCache:
		objects = limited
	case opts.FieldSelector != "" || opts.LabelSelector != "":
		objects = max(limited, count/2)
	default:
		objects = limited
	}
	bytes := objects * averageBytes
	if fromCache {
		bytes = min(bytes, cacheListMaxBytes)
	}
	return max(1, min(maxListSeats, int(math.Ceil(float64(bytes)/bytesPerSeat))))
}

// parseListOptions reads the options the estimate depends on; false if one does
// not parse.
func parseListOptions(q url.Values) (metav1.ListOptions, bool) {
	opts := metav1.ListOptions{
		LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector"),
		ResourceVersion: q.Get("resourceVersion"), Continue: q.Get("continue"),
		ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")),
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return opts, false
		}
		opts.Limit = n
	}
	return opts, true
}

// listServedFromCache says whether upstream's apiserver would serve the list from its
// watch cache (one without snapshots, on an etcd that supports consistent reads), as
// its estimate assumes: not an exact resourceVersion, a continuation, or a page at a
// given resourceVersion, nor an unknown resourceVersionMatch.
func listServedFromCache(opts metav1.ListOptions) bool {
	switch opts.ResourceVersionMatch {
	case metav1.ResourceVersionMatchExact:
		return false
	case metav1.ResourceVersionMatchNotOlderThan:
		return true
	case "":
		if opts.Continue != "" {
			return false
		}
		return !(opts.Limit > 0 && opts.ResourceVersion != "" && opts.ResourceVersion != "0")
	}
	return false
}

// namesOne: the field selector requires one name.
func namesOne(selector string) bool {
	if selector == "" {
		return false
	}
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return false
	}
	_, ok := sel.RequiresExactMatch("metadata.name")
	return ok
}

// levelMaxSeats is the most seats one request of a level takes: for a queueing
// level, 15% of its nominal seats but no more than its nominal seats over its hand
// size (at least one); maxListSeats for the others, and as the bound of all.
func levelMaxSeats(nominal, handSize int, queueing bool) int {
	if !queueing || handSize < 1 {
		return maxListSeats
	}
	seats := max(1, min(int(math.Ceil(float64(nominal)*levelMaxSeatsFraction)), nominal/handSize))
	return min(seats, maxListSeats)
}
