package kubelet

import (
	"math/rand/v2"
	"time"
)

// statusReportSchedule decides when the kubelet posts an unchanged node status anyway.
// It posts one every frequency, but after a change or a (re)start the next unchanged
// report moves by a one-time random offset in [-frequency/2, frequency/2), as upstream's
// kubelet does (delayAfterNodeStatusChange): nodes that started or changed together
// would otherwise all report in the same second every five minutes, a thousand full
// node writes, watch events and scheduler cache updates at once.
type statusReportSchedule struct {
	frequency time.Duration
	last      time.Time     // when status was last posted
	offset    time.Duration // the one-time shift of the next periodic report
	random    func() float64
}

func newStatusReportSchedule(frequency time.Duration, posted time.Time) *statusReportSchedule {
	s := &statusReportSchedule{frequency: frequency, random: rand.Float64}
	s.posted(posted, false)
	return s
}

// due reports whether an unchanged status must be posted at now.
func (s *statusReportSchedule) due(now time.Time) bool {
	return now.Sub(s.last) >= s.frequency+s.offset
}

// posted records a post at now; periodic says it was a due report rather than a change
// (or the registration), after which reports keep the plain frequency.
func (s *statusReportSchedule) posted(now time.Time, periodic bool) {
	s.last = now
	s.offset = 0
	if !periodic {
		s.offset = time.Duration(float64(s.frequency) * (s.random() - 0.5))
	}
}
