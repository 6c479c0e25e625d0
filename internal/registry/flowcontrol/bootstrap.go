package flowcontrol

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// autoUpdateAnnotation marks a configuration object the server keeps as it defines it,
// as upstream's apiserver marks the ones it creates.
const autoUpdateAnnotation = "apf.kubernetes.io/autoupdate-spec"

// Upstream's user and group names the configuration refers to.
const (
	groupMasters         = "system:masters"
	groupNodes           = "system:nodes"
	groupAuthenticated   = "system:authenticated"
	groupUnauthenticated = "system:unauthenticated"
	groupServiceAccounts = "system:serviceaccounts"
	userControllerMgr    = "system:kube-controller-manager"
	userScheduler        = "system:kube-scheduler"
)

// InitialConfiguration returns the priority levels and flow schemas every cluster
// starts with, as upstream's apiserver creates them: the mandatory ones (exempt and
// catch-all, whose specs may not change) and the suggested ones.
func InitialConfiguration() []runtime.Object {
	var objs []runtime.Object
	for _, pl := range append(mandatoryPriorityLevels(), suggestedPriorityLevels()...) {
		objs = append(objs, pl)
	}
	for _, fs := range append(mandatoryFlowSchemas(), suggestedFlowSchemas()...) {
		objs = append(objs, fs)
	}
	return objs
}

func mandatoryPriorityLevels() []*flowcontrolv1.PriorityLevelConfiguration {
	return []*flowcontrolv1.PriorityLevelConfiguration{
		{
			ObjectMeta: configMeta(flowcontrolv1.PriorityLevelConfigurationNameExempt),
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
				Type:   flowcontrolv1.PriorityLevelEnablementExempt,
				Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](0), LendablePercent: ptr.To[int32](0)},
			},
		},
		{
			ObjectMeta: configMeta(flowcontrolv1.PriorityLevelConfigurationNameCatchAll),
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
				Type: flowcontrolv1.PriorityLevelEnablementLimited,
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
					NominalConcurrencyShares: ptr.To[int32](5), LendablePercent: ptr.To[int32](0),
					LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
				},
			},
		},
	}
}

func mandatoryFlowSchemas() []*flowcontrolv1.FlowSchema {
	return []*flowcontrolv1.FlowSchema{
		flowSchema(flowcontrolv1.FlowSchemaNameExempt, flowcontrolv1.PriorityLevelConfigurationNameExempt, 1, "", allRequests(groups(groupMasters)...)),
		flowSchema(flowcontrolv1.FlowSchemaNameCatchAll, flowcontrolv1.PriorityLevelConfigurationNameCatchAll, 10000, flowcontrolv1.FlowDistinguisherMethodByUserType,
			allRequests(groups(groupUnauthenticated, groupAuthenticated)...)),
	}
}

// MandatoryPriorityLevel is the mandatory level of that name (exempt or catch-all),
// nil for another name: what the apiserver uses while the object is missing.
func MandatoryPriorityLevel(name string) *flowcontrolv1.PriorityLevelConfiguration {
	for _, pl := range mandatoryPriorityLevels() {
		if pl.Name == name {
			return pl
		}
	}
	return nil
}

// MandatoryFlowSchema is the mandatory schema of that name (exempt or catch-all), nil
// for another name.
func MandatoryFlowSchema(name string) *flowcontrolv1.FlowSchema {
	for _, fs := range mandatoryFlowSchemas() {
		if fs.Name == name {
			return fs
		}
	}
	return nil
}

func suggestedPriorityLevels() []*flowcontrolv1.PriorityLevelConfiguration {
	level := func(name string, shares, lendable, queues, handSize int32) *flowcontrolv1.PriorityLevelConfiguration {
		return &flowcontrolv1.PriorityLevelConfiguration{
			ObjectMeta: configMeta(name),
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
				Type: flowcontrolv1.PriorityLevelEnablementLimited,
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
					NominalConcurrencyShares: ptr.To(shares), LendablePercent: ptr.To(lendable),
					LimitResponse: flowcontrolv1.LimitResponse{
						Type:    flowcontrolv1.LimitResponseTypeQueue,
						Queuing: &flowcontrolv1.QueuingConfiguration{Queues: queues, HandSize: handSize, QueueLengthLimit: 50},
					},
				},
			},
		}
	}
	return []*flowcontrolv1.PriorityLevelConfiguration{
		level("system", 30, 33, 64, 6),
		level("node-high", 40, 25, 64, 6),
		level("leader-election", 10, 0, 16, 4),
		level("workload-high", 40, 50, 128, 6),
		level("workload-low", 100, 90, 128, 6),
		level("global-default", 20, 50, 128, 6),
	}
}

func suggestedFlowSchemas() []*flowcontrolv1.FlowSchema {
	byUser, byNamespace := flowcontrolv1.FlowDistinguisherMethodByUserType, flowcontrolv1.FlowDistinguisherMethodByNamespaceType
	kubeSystemSAs := serviceAccount("kube-system", flowcontrolv1.NameAll)
	leaderElection := func(namespaces ...string) []flowcontrolv1.ResourcePolicyRule {
		return []flowcontrolv1.ResourcePolicyRule{
			resourceRule([]string{"get", "create", "update"}, "coordination.k8s.io", []string{"leases"}, namespaces...),
		}
	}
	return []*flowcontrolv1.FlowSchema{
		flowSchema("probes", flowcontrolv1.PriorityLevelConfigurationNameExempt, 2, "", flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: groups(groupUnauthenticated, groupAuthenticated),
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{
				{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz", "/livez"}},
			},
		}),
		flowSchema("system-leader-election", "leader-election", 100, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      append(users(userControllerMgr, userScheduler), kubeSystemSAs),
			ResourceRules: leaderElection("kube-system"),
		}),
		flowSchema("endpoint-controller", "workload-high", 150, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: append(users(userControllerMgr), serviceAccount("kube-system", "endpoint-controller")),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{
				resourceRule([]string{"get", "create", "update"}, "", []string{"endpoints"}, flowcontrolv1.NamespaceEvery),
			},
		}),
		flowSchema("workload-leader-election", "leader-election", 200, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      []flowcontrolv1.Subject{kubeSystemSAs},
			ResourceRules: leaderElection(flowcontrolv1.NamespaceEvery),
		}),
		flowSchema("system-node-high", "node-high", 400, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: groups(groupNodes),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{
				{Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, ClusterScope: true},
				resourceRule([]string{flowcontrolv1.VerbAll}, "coordination.k8s.io", []string{"leases"}, "kube-node-lease"),
			},
		}),
		flowSchema("system-nodes", "system", 500, byUser, allRequests(groups(groupNodes)...)),
		flowSchema("kube-controller-manager", "workload-high", 800, byNamespace, allRequests(users(userControllerMgr)...)),
		flowSchema("kube-scheduler", "workload-high", 800, byNamespace, allRequests(users(userScheduler)...)),
		flowSchema("kube-system-service-accounts", "workload-high", 900, byNamespace, allRequests(kubeSystemSAs)),
		flowSchema("service-accounts", "workload-low", 9000, byUser, allRequests(groups(groupServiceAccounts)...)),
		flowSchema("global-default", "global-default", 9900, byUser, allRequests(groups(groupUnauthenticated, groupAuthenticated)...)),
	}
}

func configMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Annotations: map[string]string{autoUpdateAnnotation: "true"}}
}

func flowSchema(name, level string, precedence int32, method flowcontrolv1.FlowDistinguisherMethodType, rules ...flowcontrolv1.PolicyRulesWithSubjects) *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: configMeta(name),
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         precedence,
			Rules:                      rules,
		},
	}
	if method != "" {
		fs.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: method}
	}
	return fs
}

// allRequests matches every request, resource or not, of the subjects.
func allRequests(subjects ...flowcontrolv1.Subject) flowcontrolv1.PolicyRulesWithSubjects {
	return flowcontrolv1.PolicyRulesWithSubjects{
		Subjects: subjects,
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
			Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{flowcontrolv1.APIGroupAll}, Resources: []string{flowcontrolv1.ResourceAll},
			ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery},
		}},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
			Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
		}},
	}
}

func resourceRule(verbs []string, group string, resources []string, namespaces ...string) flowcontrolv1.ResourcePolicyRule {
	return flowcontrolv1.ResourcePolicyRule{Verbs: verbs, APIGroups: []string{group}, Resources: resources, Namespaces: namespaces}
}

func groups(names ...string) []flowcontrolv1.Subject {
	out := make([]flowcontrolv1.Subject, len(names))
	for i, n := range names {
		out[i] = flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: n}}
	}
	return out
}

func users(names ...string) []flowcontrolv1.Subject {
	out := make([]flowcontrolv1.Subject, len(names))
	for i, n := range names {
		out[i] = flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: n}}
	}
	return out
}

func serviceAccount(namespace, name string) flowcontrolv1.Subject {
	return flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: namespace, Name: name}}
}
