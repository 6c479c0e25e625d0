// Package clusterroleaggregation fills the rules of every ClusterRole that has an
// aggregationRule with the rules of the ClusterRoles its label selectors choose, as
// upstream's clusterrole-aggregation controller does: admin, edit and view grow when a
// ClusterRole labelled rbac.authorization.k8s.io/aggregate-to-* appears.
package clusterroleaggregation

import (
	"context"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacinformers "k8s.io/client-go/informers/rbac/v1"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"mizzen/internal/controller/util"
)

// Name names the controller in its logs.
const Name = "clusterrole-aggregation"

// Controller aggregates ClusterRoles; its queue holds the names of aggregated roles.
type Controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's handlers on the ClusterRole informer.
func New(client kubernetes.Interface, roles rbacinformers.ClusterRoleInformer) *Controller {
	c := &Controller{
		client: client,
		roles:  roles.Lister(),
		synced: roles.Informer().HasSynced,
		queue:  util.NewQueue("clusterrole_aggregation"),
	}
	// Any change may add rules to, or take them from, any aggregated role: look at
	// every one of them again.
	enqueueAll := func(any) { c.enqueueAggregated() }
	roles.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueAll,
		UpdateFunc: func(_, obj any) { enqueueAll(obj) },
		DeleteFunc: enqueueAll,
	})
	return c
}

func (c *Controller) enqueueAggregated() {
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return
	}
	for _, r := range all {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
	}
}

// Run aggregates until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	util.RunKeyWorkers(ctx, Name, c.queue, workers, c.sync, c.synced)
}

// sync sets the named role's rules to the union, without duplicates, of the rules of
// the roles its selectors match, taken in name order.
func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	want, err := c.aggregatedRules(role)
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(role.Rules, want) || (len(role.Rules) == 0 && len(want) == 0) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = want
	_, err = c.client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Controller) aggregatedRules(role *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	chosen := map[string]*rbacv1.ClusterRole{}
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return nil, err
		}
		matches, err := c.roles.List(selector)
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			if m.Name != role.Name {
				chosen[m.Name] = m
			}
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names)
	var rules []rbacv1.PolicyRule
	for _, n := range names {
		for _, r := range chosen[n].Rules {
			if !containsRule(rules, r) {
				rules = append(rules, r)
			}
		}
	}
	return rules, nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, x := range rules {
		if apiequality.Semantic.DeepEqual(x, r) {
			return true
		}
	}
	return false
}
