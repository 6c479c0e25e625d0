package controllermanager

// infraControllers lists the controllers that keep the cluster itself in order:
// endpoints, endpointslice, garbage collector, namespace, node lifecycle, node IPAM,
// serviceaccount, root CA publisher, resourcequota, podgc.
func infraControllers() []Descriptor {
	return nil
}
