// Package v1 holds the apiregistration.k8s.io/v1 API types (APIService), written for
// mizzen with the same JSON wire format as upstream's aggregator, which mizzen does
// not import.
package v1
