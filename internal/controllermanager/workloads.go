package controllermanager

// workloadControllers lists the controllers that run workloads: deployment, replicaset,
// replicationcontroller, daemonset, statefulset, job, cronjob, ttl-after-finished,
// disruption.
func workloadControllers() []Descriptor {
	return nil
}
