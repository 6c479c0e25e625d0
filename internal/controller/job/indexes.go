package job

import (
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// CompletionIndexKey is the annotation and label carrying an Indexed Job pod's index.
const CompletionIndexKey = batchv1.JobCompletionIndexAnnotation

// podIndex returns the completion index of pod, or -1.
func podIndex(pod *corev1.Pod) int {
	v, ok := pod.Annotations[CompletionIndexKey]
	if !ok {
		v, ok = pod.Labels[CompletionIndexKey]
	}
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// parseIndexes reads a completedIndexes string such as "1,3-5,7".
func parseIndexes(s string, limit int) map[int]bool {
	out := map[int]bool{}
	if s == "" {
		return out
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b && i < limit; i++ {
			out[i] = true
		}
	}
	return out
}

// formatIndexes writes a set of indexes in the compressed form "1,3-5,7".
func formatIndexes(set map[int]bool) string {
	idx := make([]int, 0, len(set))
	for i, ok := range set {
		if ok {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, strconv.Itoa(idx[i])+"-"+strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
