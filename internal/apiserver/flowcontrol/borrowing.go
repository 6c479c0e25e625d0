package flowcontrol

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
)

// Borrowing between priority levels (KEP-1040), with upstream's arithmetic: every
// adjustment period each level's seat demand (the seats its requests executing and
// waiting could use) over the period gives its high watermark, time-weighted average
// and standard deviation; their envelope (average plus deviation) is smoothed so that
// a level's claim decays slowly after a burst. The limited levels then share the
// nominal seats: each gets at least what it never lends and at most its nominal plus
// what it may borrow, and between those bounds seats in proportion to its smoothed
// demand (all of them scaled by one fair fraction).

const (
	// DefaultBorrowingPeriod is how often the levels' limits are recomputed, as
	// upstream's.
	DefaultBorrowingPeriod = 10 * time.Second
	// demandSmoothing is the weight the previous smoothed demand keeps at each
	// adjustment (upstream's): a burst's claim halves in about 30 periods.
	demandSmoothing = 0.977
	// minTarget stands for a target of zero, so that every level has a share to scale.
	minTarget = 0.001
)

// demandIntegrator accumulates a piecewise-constant value over time: its integral and
// that of its square (for the average and deviation), and its highest value.
type demandIntegrator struct {
	last                 time.Time
	x                    float64
	seconds, sumX, sumX2 float64
	max                  float64
}

// set integrates the value so far up to now and changes it to x.
func (d *demandIntegrator) set(now time.Time, x float64) {
	d.advance(now)
	d.x = x
	d.max = math.Max(d.max, x)
}

func (d *demandIntegrator) advance(now time.Time) {
	dt := now.Sub(d.last).Seconds()
	if dt > 0 {
		d.seconds += dt
		d.sumX += d.x * dt
		d.sumX2 += d.x * d.x * dt
	}
	d.last = now
}

// demandPeriod is what the integrator saw over one period.
type demandPeriod struct {
	seconds, avg, stdDev, max float64
}

// reset returns the period up to now and starts the next one at the current value.
func (d *demandIntegrator) reset(now time.Time) demandPeriod {
	d.advance(now)
	p := demandPeriod{seconds: d.seconds, max: d.max}
	if d.seconds > 0 {
		p.avg = d.sumX / d.seconds
		if v := d.sumX2/d.seconds - p.avg*p.avg; v > 0 {
			p.stdDev = math.Sqrt(v)
		}
	}
	d.seconds, d.sumX, d.sumX2, d.max = 0, 0, 0, d.x
	return p
}

// demandStats are a level's demand as the last adjustment took it.
type demandStats struct {
	highWatermark int
	avg, stdDev   float64
	smoothed      float64
}

// update takes in one period: the high watermark always, the rest when time passed.
func (s *demandStats) update(p demandPeriod) {
	s.highWatermark = int(math.Round(p.max))
	if p.seconds <= 0 {
		return
	}
	s.avg, s.stdDev = p.avg, p.stdDev
	envelope := p.avg + p.stdDev
	s.smoothed = math.Max(envelope, demandSmoothing*s.smoothed+(1-demandSmoothing)*envelope)
}

// levelBounds are a level's configured seats: nominal, and what it may lend and borrow.
func levelBounds(pl *flowcontrolv1.PriorityLevelConfiguration, nominal, serverSeats int) (lower, upper int) {
	var lendable, borrowing *int32
	switch {
	case pl.Spec.Limited != nil:
		lendable, borrowing = pl.Spec.Limited.LendablePercent, pl.Spec.Limited.BorrowingLimitPercent
	case pl.Spec.Exempt != nil:
		lendable = pl.Spec.Exempt.LendablePercent
	}
	lent, borrowed := 0, serverSeats // no borrowing limit: as many as the server has
	if lendable != nil {
		lent = int(math.Round(float64(nominal) * float64(*lendable) / 100))
	}
	if borrowing != nil {
		borrowed = int(math.Round(float64(nominal) * float64(*borrowing) / 100))
	}
	return nominal - lent, nominal + borrowed
}

// periodDemand closes the level's demand period and returns its bounds and stats.
func (l *level) periodDemand() (exempt bool, nominal, lower, upper int, stats demandStats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stats.update(l.demand.reset(l.now()))
	return l.exempt, l.nominal, l.lower, l.upper, l.stats
}

// adjustLimitsLocked recomputes every level's current limit from its demand since the
// last adjustment, as upstream's config controller does every period and after every
// configuration change.
//
// The exempt levels first take what they used at the most (never less than their
// lower bound). If what is left of the nominal total cannot cover the limited levels'
// lower bounds, each gets its lower bound; if it cannot cover what each used at the
// most (capped at its nominal seats), each gets its lower bound plus the same
// fraction of the rest of that. Otherwise the nominal total is shared out by
// allocate, each level's target its smoothed demand. (Upstream shares the whole
// nominal total there, not what the exempt levels left; so does this.)
//
// Every level's demand, target and limit are shown on /metrics, the exempt levels'
// too, as upstream's. An exempt level has no target of its own: upstream shows the
// first limited level's (it reads the targets at an index left at zero), the first
// in its map's order; this shows the first by name, one of the values upstream may.
func (c *Controller) adjustLimitsLocked() {
	type limited struct {
		l          *level
		lower      int
		minCurrent int
		stats      demandStats
	}
	var (
		levels                  []limited
		items                   []allocItem
		exemptLimits            = map[*level]int{}
		exemptStats             = map[*level]demandStats{}
		nominalSum, lowerSum    int
		minCurrentSum, leftOver int
	)
	states := slices.SortedFunc(maps.Values(c.states), func(a, b *level) int { return strings.Compare(a.name, b.name) })
	for _, l := range states {
		exempt, nominal, lower, upper, stats := l.periodDemand()
		nominalSum += nominal
		if exempt {
			exemptLimits[l] = max(lower, stats.highWatermark)
			exemptStats[l] = stats
			continue
		}
		minCurrent := max(lower, min(nominal, stats.highWatermark))
		levels = append(levels, limited{l, lower, minCurrent, stats})
		items = append(items, allocItem{lower: float64(minCurrent), upper: float64(upper),
			target: math.Max(float64(minCurrent), stats.smoothed)})
		lowerSum += lower
		minCurrentSum += minCurrent
	}
	leftOver = nominalSum
	for _, cl := range exemptLimits {
		leftOver -= cl
	}
	var limitOf func(i int) int
	fairFrac := 0.0
	switch {
	case leftOver <= lowerSum:
		limitOf = func(i int) int { return levels[i].lower }
	case leftOver <= minCurrentSum:
		share := float64(leftOver-lowerSum) / float64(minCurrentSum-lowerSum)
		limitOf = func(i int) int {
			lv := levels[i]
			return lv.lower + int(math.Round(float64(lv.minCurrent-lv.lower)*share))
		}
	default:
		allocs, frac, err := allocate(float64(nominalSum), items)
		if err != nil {
			c.opts.Logger.Error("recomputing the priority levels' seats; keeping them", "err", err)
			return
		}
		limitOf = func(i int) int { return int(math.Round(allocs[i])) }
		fairFrac = frac
	}
	c.metrics.fairFrac.Set(fairFrac)
	for i, lv := range levels {
		c.setLimit(lv.l, limitOf(i))
		c.metrics.noteDemand(lv.l.name, lv.stats, items[i].target)
	}
	exemptTarget := 0.0
	if len(items) > 0 {
		exemptTarget = items[0].target
	}
	for l, limit := range exemptLimits {
		c.setLimit(l, limit)
		c.metrics.noteDemand(l.name, exemptStats[l], exemptTarget)
	}
}

// setLimit gives a level its current limit and shows it on /metrics. Its demand is
// shown over that limit, or, while it is zero, over a tenth of the server's seats
// (at least one), as upstream's.
func (c *Controller) setLimit(l *level, limit int) {
	denominator := limit
	if limit <= 0 {
		denominator = max(1, int(math.Round(float64(c.opts.ServerSeats)/10)))
	}
	l.setLimit(limit, denominator)
	c.metrics.currentLimit.WithLabelValues(l.name).Set(float64(limit))
}

// RunBorrowing recomputes the levels' limits every period until ctx ends.
func (c *Controller) RunBorrowing(ctx context.Context) {
	t := time.NewTicker(c.opts.BorrowingPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		c.adjustLimitsLocked()
		c.mu.Unlock()
	}
}

// allocItem is one level in allocate: the seats it must get at least and may get at
// most, and the share it aims at.
type allocItem struct {
	lower, upper, target float64
}

// allocate shares total out among the items: each gets its target times one common
// fraction, held within its bounds, the fraction being the one for which the shares
// sum to total. It returns the shares and the fraction.
//
// The sum is, as a function of the fraction, continuous, non-decreasing and linear
// between the points where an item reaches a bound (lower/target, upper/target); the
// answer is found by evaluating it at those points in order and interpolating
// linearly within the segment where it reaches total.
func allocate(total float64, items []allocItem) ([]float64, float64, error) {
	const epsilon = 1e-7
	var lowerSum, upperSum float64
	targets := make([]float64, len(items))
	var points []float64
	for i, it := range items {
		switch {
		case it.lower < 0:
			return nil, 0, errors.New("a negative lower bound")
		case it.target < it.lower:
			return nil, 0, errors.New("a target below its lower bound")
		case it.upper < it.lower:
			return nil, 0, errors.New("an upper bound below its lower bound")
		}
		targets[i] = math.Max(it.target, minTarget)
		lowerSum += it.lower
		upperSum += it.upper
		points = append(points, it.lower/targets[i], it.upper/targets[i])
	}
	shares := func(frac float64) []float64 {
		out := make([]float64, len(items))
		for i, it := range items {
			out[i] = math.Max(it.lower, math.Min(it.upper, frac*targets[i]))
		}
		return out
	}
	sum := func(frac float64) float64 {
		var s float64
		for _, x := range shares(frac) {
			s += x
		}
		return s
	}
	switch {
	case lowerSum-total > epsilon:
		return nil, 0, errors.New("the lower bounds sum to more than the total")
	case total-upperSum > epsilon:
		return nil, 0, errors.New("the upper bounds sum to less than the total")
	case len(items) == 0:
		return nil, 0, nil
	}
	slices.Sort(points)
	if total-lowerSum < epsilon {
		return shares(points[0]), points[0], nil
	}
	prev, prevSum := points[0], lowerSum
	for _, p := range points[1:] {
		s := sum(p)
		if s >= total-epsilon {
			frac := p
			if s > prevSum {
				frac = prev + (total-prevSum)*(p-prev)/(s-prevSum)
			}
			return shares(frac), frac, nil
		}
		prev, prevSum = p, s
	}
	last := points[len(points)-1]
	return shares(last), last, nil
}
