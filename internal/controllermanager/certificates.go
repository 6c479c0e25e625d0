package controllermanager

import (
	"context"

	"mizzen/internal/controller/csr"
	"mizzen/internal/controller/tokencleaner"
)

// certificateControllers are the controllers of node joining: CSR approval, signing
// and cleaning, and the bootstrap token cleaner (off by default upstream, on in
// kubeadm's clusters and here, since mizzen's join tokens are bootstrap tokens).
func certificateControllers() []Descriptor {
	return []Descriptor{
		{Name: "certificatesigningrequest-approving-controller", Aliases: []string{"csrapproving"}, Account: "certificate-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			c := csr.NewApprover(cc.Client, cc.Informers.Certificates().V1().CertificateSigningRequests(), cc.Informers.Core().V1().Nodes(), cc.Informers.Coordination().V1().Leases())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "certificatesigningrequest-signing-controller", Aliases: []string{"csrsigning"}, Account: "certificate-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			o := cc.Options
			if o.ClusterSigningCertFile == "" || o.ClusterSigningKeyFile == "" {
				return notConfigured("no --cluster-signing-cert-file and --cluster-signing-key-file")
			}
			ca, err := csr.LoadCA(o.ClusterSigningCertFile, o.ClusterSigningKeyFile)
			if err != nil {
				return err
			}
			c := csr.NewSigner(cc.Client, cc.Informers.Certificates().V1().CertificateSigningRequests(), ca, o.ClusterSigningDuration)
			go c.Run(ctx, o.ConcurrentSyncs)
			return nil
		}},
		{Name: "certificatesigningrequest-cleaner-controller", Aliases: []string{"csrcleaner"}, Account: "certificate-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			go csr.NewCleaner(cc.Client, cc.Informers.Certificates().V1().CertificateSigningRequests()).Run(ctx)
			return nil
		}},
		{Name: "token-cleaner-controller", Aliases: []string{"tokencleaner"}, Account: "token-cleaner", Start: func(ctx context.Context, cc *ControllerContext) error {
			go tokencleaner.New(cc.Client, cc.Informers.Core().V1().Secrets()).Run(ctx, 1)
			return nil
		}},
	}
}
