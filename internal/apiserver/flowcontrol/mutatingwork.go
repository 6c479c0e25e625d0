package flowcontrol

import (
	"math"
	"time"
)

// Upstream's mutating work estimate (kube-apiserver v1.37, on by default): a create,
// update, patch or delete costs its server, after its handler returns, the watch
// events it sends, about 5 ms of a seat per 10 watchers notified. So it keeps final
// seats, one per 10 watchers (none under 10), for 5 ms (longer when its level caps the
// seats, the same seat-seconds held by fewer seats), which its level may not give to
// others meanwhile.
const (
	watchesPerSeat          = 10
	eventAdditionalDuration = 5 * time.Millisecond
	// maxMutatingSeats bounds the final seats, as upstream's default does.
	maxMutatingSeats = 10
)

// mutates: the verb changes an object, whose watchers are then notified.
func mutates(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete":
		return true
	}
	return false
}

// mutationWork is the final seats and the time they are held of a mutation whose
// change notifies the given watchers, with at most maxSeats final seats.
func mutationWork(watchers, maxSeats int) (int, time.Duration) {
	if watchers < watchesPerSeat {
		return 0, 0
	}
	seats := int(math.Ceil(float64(watchers) / watchesPerSeat))
	work := seatsTimes(float64(seats), eventAdditionalDuration)
	seats = min(seats, max(1, min(maxSeats, maxMutatingSeats)))
	return seats, work.perSeat(float64(seats))
}

// finalWork is the request's final seats and their additional latency: a mutation's,
// from the watches its change will notify (a token request's, which changes nothing
// watched, is none, as upstream's). An exempt mutation is estimated too, as
// upstream's: it waits for nothing, but the seats it holds count in its level's
// executing seats and demand, and so in what the exempt level takes of the server's
// seats at the next borrowing adjustment.
func (c *Controller) finalWork(s *compiledSchema, r *Request) (int, time.Duration) {
	if !r.ResourceRequest || !mutates(r.Verb) || (r.Resource == "serviceaccounts" && r.Subresource == "token") {
		return 0, 0
	}
	watchers := c.watches.interested(r)
	s.metrics.watchCount.get().Observe(float64(watchers))
	return mutationWork(watchers, int(s.level.maxSeats.Load()))
}
