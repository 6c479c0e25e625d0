package framework

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

func resourceQuantityMilli(milli int64) *resource.Quantity {
	return resource.NewMilliQuantity(milli, resource.DecimalSI)
}

func resourceQuantity(v int64) *resource.Quantity {
	return resource.NewQuantity(v, resource.BinarySI)
}

// ReasonHistogram counts reasons over nodes and renders "N reason" items sorted
// alphabetically and joined by ", ", the way upstream reports a failed attempt.
func ReasonHistogram(nodeToStatus map[string]*Status) string {
	counts := map[string]int{}
	for _, s := range nodeToStatus {
		for _, r := range s.Reasons() {
			counts[r]++
		}
	}
	items := make([]string, 0, len(counts))
	for r, n := range counts {
		items = append(items, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(items)
	return strings.Join(items, ", ")
}
