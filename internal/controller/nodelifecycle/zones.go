package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// EvictionOptions are the flags that pace the NoExecute tainting of unhealthy nodes,
// zone by zone, as upstream's --node-eviction-rate family. Zero values take
// upstream's defaults; a negative rate means none (a flag set to 0).
type EvictionOptions struct {
	// Rate is how many nodes per second may get a NoExecute taint in a healthy zone
	// (or a fully disrupted one while other zones are healthy). Default 0.1.
	Rate float64
	// SecondaryRate replaces Rate in a partially disrupted zone of more than
	// LargeClusterSizeThreshold nodes; smaller partially disrupted zones evict nothing.
	// Default 0.01.
	SecondaryRate float64
	// UnhealthyZoneThreshold is the fraction of not-Ready nodes (at least 3) from which
	// a zone counts as partially disrupted. Default 0.55.
	UnhealthyZoneThreshold float64
	// LargeClusterSizeThreshold: default 50.
	LargeClusterSizeThreshold int
}

func (o EvictionOptions) withDefaults() EvictionOptions {
	if o.Rate == 0 {
		o.Rate = 0.1
	}
	if o.SecondaryRate == 0 {
		o.SecondaryRate = 0.01
	}
	if o.UnhealthyZoneThreshold == 0 {
		o.UnhealthyZoneThreshold = 0.55
	}
	if o.LargeClusterSizeThreshold == 0 {
		o.LargeClusterSizeThreshold = 50
	}
	return o
}

// zoneState is upstream's classification of a zone by how many of its nodes are Ready.
type zoneState string

const (
	zoneNormal            zoneState = "Normal"
	zoneFullDisruption    zoneState = "FullDisruption"
	zonePartialDisruption zoneState = "PartialDisruption"
)

// zoneKey names a node's failure domain from its region and zone labels ("" when it
// has neither: a cluster without zones is one zone).
func zoneKey(node *corev1.Node) string {
	region, zone := node.Labels[corev1.LabelTopologyRegion], node.Labels[corev1.LabelTopologyZone]
	if region == "" {
		region = node.Labels[corev1.LabelFailureDomainBetaRegion]
	}
	if zone == "" {
		zone = node.Labels[corev1.LabelFailureDomainBetaZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// zoneCount is how many nodes of a zone are Ready and how many are not.
type zoneCount struct{ ready, notReady int }

// state classifies the zone: no Ready node at all is a full disruption; at least
// three not-Ready nodes making up at least threshold of the zone is a partial one.
func (z zoneCount) state(threshold float64) zoneState {
	switch {
	case z.ready == 0 && z.notReady > 0:
		return zoneFullDisruption
	case z.notReady > 2 && float64(z.notReady)/float64(z.notReady+z.ready) >= threshold:
		return zonePartialDisruption
	default:
		return zoneNormal
	}
}

// zoneView is the health of every zone at one moment.
type zoneView struct {
	counts map[string]zoneCount
	at     time.Time
}

// allFullyDisrupted reports whether no node anywhere is Ready: upstream then blames
// the control plane's connectivity rather than the nodes and evicts nothing.
func (v zoneView) allFullyDisrupted(threshold float64) bool {
	if len(v.counts) == 0 {
		return false
	}
	for _, c := range v.counts {
		if c.state(threshold) != zoneFullDisruption {
			return false
		}
	}
	return true
}

// evictionRate is how many nodes per second of the zone may be given a NoExecute
// taint in its current state.
func (o EvictionOptions) evictionRate(c zoneCount) float64 {
	if c.state(o.UnhealthyZoneThreshold) == zonePartialDisruption {
		if c.ready+c.notReady > o.LargeClusterSizeThreshold {
			return o.SecondaryRate
		}
		return 0
	}
	return o.Rate
}
