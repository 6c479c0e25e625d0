package eviction

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names a resource whose shortage can trigger node-pressure eviction, as
// upstream's kubelet spells it in --eviction-hard and friends.
type Signal string

// The signals this kubelet observes.
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
)

// signals lists every supported signal in upstream's order of eviction priority:
// memory first.
var signals = []Signal{
	SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree,
	SignalImageFsAvailable, SignalImageFsInodesFree, SignalPIDAvailable,
}

// Resources reclaimed for signals without a core resource name of their own, as
// upstream names them in eviction messages.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// DefaultHard is upstream's --eviction-hard default. It applies only when the flag is
// not given: a flag naming some signals leaves the others without a threshold, as
// upstream's kubelet does.
const DefaultHard = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%,imagefs.inodesFree<5%"

// DefaultPressureTransitionPeriod is how long a pressure condition stays True after
// its threshold was last met, upstream's --eviction-pressure-transition-period default.
const DefaultPressureTransitionPeriod = 5 * time.Minute

// condition is the node condition a signal's threshold drives.
func (s Signal) condition() v1.NodeConditionType {
	switch s {
	case SignalMemoryAvailable:
		return v1.NodeMemoryPressure
	case SignalPIDAvailable:
		return v1.NodePIDPressure
	default:
		return v1.NodeDiskPressure
	}
}

// resource is the resource a signal's threshold reclaims, named in eviction messages.
func (s Signal) resource() v1.ResourceName {
	switch s {
	case SignalMemoryAvailable:
		return v1.ResourceMemory
	case SignalNodeFsAvailable, SignalImageFsAvailable:
		return v1.ResourceEphemeralStorage
	case SignalNodeFsInodesFree, SignalImageFsInodesFree:
		return resourceInodes
	default:
		return resourcePIDs
	}
}

// isDisk reports whether the signal measures a filesystem, where the kubelet can
// reclaim space itself before it evicts pods.
func (s Signal) isDisk() bool { return s.condition() == v1.NodeDiskPressure }

func validSignal(s Signal) bool {
	for _, known := range signals {
		if s == known {
			return true
		}
	}
	return false
}

// Value is an amount of a signal's resource: a quantity, or a fraction of the
// resource's capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float32 // 0.1 for 10%; used when Quantity is nil
}

// of is the value as a quantity, given the resource's capacity.
func (v Value) of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(capacity) * float64(v.Percentage))
}

// String is the value as it was written.
func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(float64(v.Percentage)*100, 'g', 6, 64) + "%"
}

// Threshold is one eviction threshold: met while the signal's available amount is
// below Value.
type Threshold struct {
	Signal Signal
	Value  Value
	// GracePeriod is how long a soft threshold must stay met before pods are evicted
	// for it; zero for a hard threshold.
	GracePeriod time.Duration
	// Soft marks a threshold of --eviction-soft.
	Soft bool
	// MinReclaim is how far past the threshold the kubelet reclaims once it acts: the
	// threshold stays met until available reaches Value plus MinReclaim.
	MinReclaim *Value
}

// ThresholdFlags are the eviction settings as the kubelet's flags spell them.
type ThresholdFlags struct {
	Hard            string // --eviction-hard, memory.available<100Mi,...
	Soft            string // --eviction-soft, same form
	SoftGracePeriod string // --eviction-soft-grace-period, memory.available=1m30s,...
	MinimumReclaim  string // --eviction-minimum-reclaim, memory.available=0Mi,...
}

// ParseThresholds parses and validates the flags as upstream's kubelet does: signals
// must be known, quantities positive, percentages within 0-100% (0% and 100% mean no
// threshold), every soft threshold needs a grace period.
func ParseThresholds(f ThresholdFlags) ([]Threshold, error) {
	hard, err := parseMap(f.Hard, "<")
	if err != nil {
		return nil, fmt.Errorf("--eviction-hard: %w", err)
	}
	soft, err := parseMap(f.Soft, "<")
	if err != nil {
		return nil, fmt.Errorf("--eviction-soft: %w", err)
	}
	graces, err := parseMap(f.SoftGracePeriod, "=")
	if err != nil {
		return nil, fmt.Errorf("--eviction-soft-grace-period: %w", err)
	}
	reclaims, err := parseMap(f.MinimumReclaim, "=")
	if err != nil {
		return nil, fmt.Errorf("--eviction-minimum-reclaim: %w", err)
	}

	var out []Threshold
	for _, m := range []struct {
		flag  string
		exprs map[Signal]string
		soft  bool
	}{{"--eviction-hard", hard, false}, {"--eviction-soft", soft, true}} {
		for _, sig := range sortedSignals(m.exprs) {
			v, err := parseThresholdValue(sig, m.exprs[sig])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.flag, err)
			}
			if v == nil {
				continue
			}
			out = append(out, Threshold{Signal: sig, Value: *v, Soft: m.soft})
		}
	}
	for sig, val := range graces {
		if !validSignal(sig) {
			return nil, fmt.Errorf("--eviction-soft-grace-period: unsupported eviction signal %v", sig)
		}
		d, err := time.ParseDuration(val)
		if err != nil {
			return nil, fmt.Errorf("--eviction-soft-grace-period: %w", err)
		}
		if d < 0 {
			return nil, fmt.Errorf("--eviction-soft-grace-period: invalid eviction grace period specified: %v, must be a positive value", val)
		}
		for i := range out {
			if out[i].Soft && out[i].Signal == sig {
				out[i].GracePeriod = d
			}
		}
	}
	for i := range out {
		if _, ok := graces[out[i].Signal]; out[i].Soft && !ok {
			return nil, fmt.Errorf("--eviction-soft-grace-period: grace period must be specified for the soft eviction threshold %v", out[i].Signal)
		}
	}
	for _, sig := range sortedSignals(reclaims) {
		v, err := parseMinReclaim(sig, reclaims[sig])
		if err != nil {
			return nil, fmt.Errorf("--eviction-minimum-reclaim: %w", err)
		}
		for i := range out {
			if out[i].Signal == sig {
				out[i].MinReclaim = v
			}
		}
	}
	return out, nil
}

// parseMap splits "k<v,k<v" (or "k=v,...") into a map; empty input is an empty map.
func parseMap(s, sep string) (map[Signal]string, error) {
	out := map[Signal]string{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, sep)
		if !ok {
			return nil, fmt.Errorf("malformed pair %q, expect string%sstring", pair, sep)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, dup := out[Signal(k)]; dup {
			return nil, fmt.Errorf("signal %s given twice", k)
		}
		out[Signal(k)] = v
	}
	return out, nil
}

func sortedSignals(m map[Signal]string) []Signal {
	out := make([]Signal, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// parseThresholdValue parses one threshold's value; nil (and no error) for 0% and
// 100%, which upstream ignores.
func parseThresholdValue(sig Signal, val string) (*Value, error) {
	if !validSignal(sig) {
		return nil, fmt.Errorf("unsupported eviction signal %v", sig)
	}
	if strings.HasSuffix(val, "%") {
		if val == "0%" || val == "100%" {
			return nil, nil
		}
		p, err := parsePercentage(val)
		if err != nil {
			return nil, err
		}
		if p < 0 {
			return nil, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", sig, val)
		}
		if p > 1 {
			return nil, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", sig, val)
		}
		return &Value{Percentage: p}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, fmt.Errorf("eviction threshold %v: %q: %w", sig, val, err)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("eviction threshold %v must be positive: %s", sig, q.String())
	}
	return &Value{Quantity: &q}, nil
}

func parseMinReclaim(sig Signal, val string) (*Value, error) {
	if !validSignal(sig) {
		return nil, fmt.Errorf("unsupported eviction signal %v", sig)
	}
	if strings.HasSuffix(val, "%") {
		p, err := parsePercentage(val)
		if err != nil {
			return nil, err
		}
		if p <= 0 {
			return nil, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", sig, val)
		}
		if p > 1 {
			return nil, fmt.Errorf("eviction percentage minimum reclaim %v must be <= 100%%: %s", sig, val)
		}
		return &Value{Percentage: p}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, fmt.Errorf("eviction minimum reclaim %v: %q: %w", sig, val, err)
	}
	if q.Sign() < 0 {
		return nil, fmt.Errorf("negative eviction minimum reclaim specified for %v", sig)
	}
	return &Value{Quantity: &q}, nil
}

func parsePercentage(val string) (float32, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 32)
	if err != nil {
		return 0, fmt.Errorf("invalid percentage %q", val)
	}
	return float32(f) / 100, nil
}
