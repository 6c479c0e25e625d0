// Package util holds helpers shared by the workload controllers: the worker loop around
// a rate-limited workqueue, expectations, controller references and adoption, pod
// readiness and availability, and the hash of a pod template. Controllers never import
// each other; what two of them need lives here.
package util
