package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"mizzen/internal/agent"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/datadir"
	"mizzen/internal/jointoken"
)

// ownAgentTokenTTL bounds the bootstrap token the server makes for its own agent; the
// agent deletes it once it has its certificates, so this only matters if it never does.
const ownAgentTokenTTL = time.Hour

// joinOwnAgent gets the bundled agent's kubelet credentials as a joining node's: with
// a bootstrap token of its own (checked against the cluster CA like any other), the
// kubelet files a CSR for system:node:NAME, which the controller-manager's csrapproving
// approves and csrsigning signs; its serving certificate follows the same way, and both
// rotate. So the Node authorizer and NodeRestriction see the server's node exactly as
// every other. Certificates still valid from an earlier start are used as they are.
func joinOwnAgent(ctx context.Context, cp *core.ControlPlane, ao *agent.Options, log *slog.Logger) error {
	admin, err := kubernetes.NewForConfig(cp.AdminConfig)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(cp.CAFile())
	if err != nil {
		return err
	}
	tok, err := jointoken.Create(ctx, admin, caPEM, jointoken.Options{Role: jointoken.RoleAgent, TTL: ownAgentTokenTTL,
		Description: "mizzen server's own agent (deleted once it has its certificates)"})
	if err != nil {
		return fmt.Errorf("a bootstrap token for the server's own agent: %w", err)
	}
	defer func() {
		// Its certificates renew themselves from now on; a cleanup failure leaves a
		// token the token cleaner deletes when it expires.
		if _, err := jointoken.Delete(context.WithoutCancel(ctx), admin, tok.ID); err != nil {
			log.Warn("deleting the own agent's bootstrap token", "id", tok.ID, "err", err)
		}
	}()
	for {
		joined, err := agent.Join(ctx, agent.JoinOptions{Server: cp.AdminConfig.Host, Token: tok.String(),
			Dir: datadir.Dir(cp.DataDir), NodeName: ao.Kubelet.HostnameOverride})
		if err == nil {
			ao.KubeletConfig, ao.Joined = joined.KubeletConfig, joined
			ao.Kubelet.ServingCertificate = joined.Serving.GetCertificate
			return nil
		}
		// A server restarted without its certificates (a data directory from before
		// its agent joined by token) finds its own node's Lease still fresh: the
		// approver refuses the name until the Lease goes stale (40 s), then approves.
		if ctx.Err() != nil || !strings.Contains(err.Error(), "NodeNameInUse") {
			return fmt.Errorf("the server's own agent joining: %w", err)
		}
		log.Warn("the server's own agent waits for its node's previous Lease to lapse", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}
}
