package apps

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestStatusValidation(t *testing.T) {
	ctx := context.Background()
	deployment := func(s appsv1.DeploymentStatus) *appsv1.Deployment {
		d := newDeployment()
		Deployments().Strategy.Default(d)
		d.Status = s
		return d
	}
	replicaSet := func(s appsv1.ReplicaSetStatus) *appsv1.ReplicaSet {
		rs := newReplicaSet()
		ReplicaSets().Strategy.Default(rs)
		rs.Status = s
		return rs
	}
	statefulSet := func(s appsv1.StatefulSetStatus) *appsv1.StatefulSet {
		ss := newStatefulSet()
		StatefulSets().Strategy.Default(ss)
		ss.Status = s
		return ss
	}
	daemonSet := func(s appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		ds := newDaemonSet()
		DaemonSets().Strategy.Default(ds)
		ds.Status = s
		return ds
	}
	tests := []struct {
		name     string
		validate func() field.ErrorList
		want     []wantError
	}{
		{"deployment progress", func() field.ErrorList {
			return Deployments().Strategy.ValidateUpdate(ctx,
				deployment(appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 1}),
				deployment(appsv1.DeploymentStatus{}))
		}, nil},
		{"deployment counts", func() field.ErrorList {
			return Deployments().Strategy.ValidateUpdate(ctx,
				deployment(appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 2, AvailableReplicas: 3, UnavailableReplicas: -1}),
				deployment(appsv1.DeploymentStatus{}))
		}, []wantError{
			{"status.unavailableReplicas", field.ErrorTypeInvalid},
			{"status.readyReplicas", field.ErrorTypeInvalid},
			{"status.availableReplicas", field.ErrorTypeInvalid},
			{"status.availableReplicas", field.ErrorTypeInvalid},
		}},
		{"deployment collision count decremented", func() field.ErrorList {
			return Deployments().Strategy.ValidateUpdate(ctx,
				deployment(appsv1.DeploymentStatus{CollisionCount: ptr(int32(1))}),
				deployment(appsv1.DeploymentStatus{CollisionCount: ptr(int32(2))}))
		}, []wantError{{"status.collisionCount", field.ErrorTypeInvalid}}},
		{"an unchanged status is not judged", func() field.ErrorList {
			bad := appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 2}
			return Deployments().Strategy.ValidateUpdate(ctx, deployment(bad), deployment(bad))
		}, nil},
		{"replicaset counts", func() field.ErrorList {
			return ReplicaSets().Strategy.ValidateUpdate(ctx,
				replicaSet(appsv1.ReplicaSetStatus{Replicas: 2, FullyLabeledReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 2}),
				replicaSet(appsv1.ReplicaSetStatus{}))
		}, []wantError{{"status.fullyLabeledReplicas", field.ErrorTypeInvalid}, {"status.availableReplicas", field.ErrorTypeInvalid}}},
		{"statefulset counts", func() field.ErrorList {
			return StatefulSets().Strategy.ValidateUpdate(ctx,
				statefulSet(appsv1.StatefulSetStatus{Replicas: 1, CurrentReplicas: 2, ObservedGeneration: -1}),
				statefulSet(appsv1.StatefulSetStatus{}))
		}, []wantError{{"status.currentReplicas", field.ErrorTypeInvalid}, {"status.observedGeneration", field.ErrorTypeInvalid}}},
		{"daemonset counts", func() field.ErrorList {
			return DaemonSets().Strategy.ValidateUpdate(ctx,
				daemonSet(appsv1.DaemonSetStatus{NumberReady: -1, DesiredNumberScheduled: 2}),
				daemonSet(appsv1.DaemonSetStatus{}))
		}, []wantError{{"status.numberReady", field.ErrorTypeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrors(t, tt.validate(), tt.want)
		})
	}
}
