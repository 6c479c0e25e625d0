package eviction

import (
	"strings"
	"testing"
)

// describe renders thresholds compactly: signal<value[~grace][+minReclaim], soft ones
// prefixed with "soft:".
func describe(ts []Threshold) string {
	var parts []string
	for _, t := range ts {
		s := string(t.Signal) + "<" + t.Value.String()
		if t.Soft {
			s = "soft:" + s + "~" + t.GracePeriod.String()
		}
		if t.MinReclaim != nil {
			s += "+" + t.MinReclaim.String()
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		name    string
		flags   ThresholdFlags
		want    string
		wantErr string
	}{{
		name:  "upstream's default",
		flags: ThresholdFlags{Hard: DefaultHard},
		want:  "imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%",
	}, {
		name: "nothing",
	}, {
		name: "soft thresholds with grace periods and minimum reclaim",
		flags: ThresholdFlags{
			Hard: "memory.available<1Gi", Soft: "memory.available<1.5Gi,pid.available<10%",
			SoftGracePeriod: "memory.available=1m30s,pid.available=10s", MinimumReclaim: "memory.available=500Mi",
		},
		want: "memory.available<1Gi+500Mi,soft:memory.available<1536Mi~1m30s+500Mi,soft:pid.available<10%~10s",
	}, {
		name:  "0% and 100% are no threshold",
		flags: ThresholdFlags{Hard: "nodefs.available<0%,imagefs.available<100%,memory.available<1Mi"},
		want:  "memory.available<1Mi",
	}, {
		name:  "spaces around pairs",
		flags: ThresholdFlags{Hard: " memory.available<100Mi , nodefs.available<10% "},
		want:  "memory.available<100Mi,nodefs.available<10%",
	}, {
		name:    "unknown signal",
		flags:   ThresholdFlags{Hard: "memory.free<100Mi"},
		wantErr: "--eviction-hard: unsupported eviction signal memory.free",
	}, {
		name:    "not a pair",
		flags:   ThresholdFlags{Hard: "memory.available=100Mi"},
		wantErr: `--eviction-hard: malformed pair "memory.available=100Mi", expect string<string`,
	}, {
		name:    "negative quantity",
		flags:   ThresholdFlags{Hard: "memory.available<-1Mi"},
		wantErr: "--eviction-hard: eviction threshold memory.available must be positive: -1Mi",
	}, {
		name:    "zero quantity",
		flags:   ThresholdFlags{Soft: "memory.available<0", SoftGracePeriod: "memory.available=1m"},
		wantErr: "--eviction-soft: eviction threshold memory.available must be positive: 0",
	}, {
		name:    "not a quantity",
		flags:   ThresholdFlags{Hard: "memory.available<lots"},
		wantErr: `--eviction-hard: eviction threshold memory.available: "lots": quantities must match the regular expression`,
	}, {
		name:    "percentage over 100",
		flags:   ThresholdFlags{Hard: "nodefs.available<150%"},
		wantErr: "--eviction-hard: eviction percentage threshold nodefs.available must be <= 100%: 150%",
	}, {
		name:    "negative percentage",
		flags:   ThresholdFlags{Hard: "nodefs.available<-5%"},
		wantErr: "--eviction-hard: eviction percentage threshold nodefs.available must be >= 0%: -5%",
	}, {
		name:    "not a percentage",
		flags:   ThresholdFlags{Hard: "nodefs.available<ten%"},
		wantErr: `--eviction-hard: invalid percentage "ten%"`,
	}, {
		name:    "soft threshold without a grace period",
		flags:   ThresholdFlags{Soft: "memory.available<1Gi"},
		wantErr: "--eviction-soft-grace-period: grace period must be specified for the soft eviction threshold memory.available",
	}, {
		name:    "negative grace period",
		flags:   ThresholdFlags{Soft: "memory.available<1Gi", SoftGracePeriod: "memory.available=-1m"},
		wantErr: "--eviction-soft-grace-period: invalid eviction grace period specified: -1m, must be a positive value",
	}, {
		name:    "grace period of an unknown signal",
		flags:   ThresholdFlags{SoftGracePeriod: "cpu.available=1m"},
		wantErr: "--eviction-soft-grace-period: unsupported eviction signal cpu.available",
	}, {
		name:    "negative minimum reclaim",
		flags:   ThresholdFlags{Hard: "memory.available<1Gi", MinimumReclaim: "memory.available=-1Mi"},
		wantErr: "--eviction-minimum-reclaim: negative eviction minimum reclaim specified for memory.available",
	}, {
		name:    "zero percentage minimum reclaim",
		flags:   ThresholdFlags{Hard: "nodefs.available<10%", MinimumReclaim: "nodefs.available=0%"},
		wantErr: "--eviction-minimum-reclaim: eviction percentage minimum reclaim nodefs.available must be positive: 0%",
	}, {
		name:    "a signal given twice",
		flags:   ThresholdFlags{Hard: "memory.available<1Gi,memory.available<2Gi"},
		wantErr: "--eviction-hard: signal memory.available given twice",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseThresholds(tt.flags)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := describe(got); d != tt.want {
				t.Errorf("thresholds %s, want %s", d, tt.want)
			}
		})
	}
}

func TestThresholdMet(t *testing.T) {
	parse := func(flags ThresholdFlags) Threshold {
		t.Helper()
		ts, err := ParseThresholds(flags)
		if err != nil || len(ts) != 1 {
			t.Fatalf("parsing %+v: %v, %d thresholds", flags, err, len(ts))
		}
		return ts[0]
	}
	tests := []struct {
		name       string
		threshold  Threshold
		obs        map[Signal]Observation
		minReclaim bool
		want       bool
	}{{
		name:      "quantity, available below",
		threshold: parse(ThresholdFlags{Hard: "memory.available<100Mi"}),
		obs:       map[Signal]Observation{SignalMemoryAvailable: {Available: 99 * mi, Capacity: 1024 * mi}},
		want:      true,
	}, {
		name:      "quantity, available exactly at the threshold",
		threshold: parse(ThresholdFlags{Hard: "memory.available<100Mi"}),
		obs:       map[Signal]Observation{SignalMemoryAvailable: {Available: 100 * mi, Capacity: 1024 * mi}},
	}, {
		name:      "percentage of capacity",
		threshold: parse(ThresholdFlags{Hard: "nodefs.available<10%"}),
		obs:       map[Signal]Observation{SignalNodeFsAvailable: {Available: 99, Capacity: 1000}},
		want:      true,
	}, {
		name:      "percentage not met",
		threshold: parse(ThresholdFlags{Hard: "nodefs.available<10%"}),
		obs:       map[Signal]Observation{SignalNodeFsAvailable: {Available: 101, Capacity: 1000}},
	}, {
		name:      "signal not observed",
		threshold: parse(ThresholdFlags{Hard: "pid.available<10%"}),
		obs:       map[Signal]Observation{SignalMemoryAvailable: {Available: 0, Capacity: 1000}},
	}, {
		name:       "minimum reclaim keeps a threshold met past its value",
		threshold:  parse(ThresholdFlags{Hard: "memory.available<100Mi", MinimumReclaim: "memory.available=50Mi"}),
		obs:        map[Signal]Observation{SignalMemoryAvailable: {Available: 120 * mi, Capacity: 1024 * mi}},
		minReclaim: true,
		want:       true,
	}, {
		name:      "minimum reclaim ignored for a new threshold",
		threshold: parse(ThresholdFlags{Hard: "memory.available<100Mi", MinimumReclaim: "memory.available=50Mi"}),
		obs:       map[Signal]Observation{SignalMemoryAvailable: {Available: 120 * mi, Capacity: 1024 * mi}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.threshold.met(tt.obs, tt.minReclaim); got != tt.want {
				t.Errorf("met = %v, want %v", got, tt.want)
			}
		})
	}
}
