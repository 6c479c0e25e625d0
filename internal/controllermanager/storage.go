package controllermanager

import (
	"context"

	"mizzen/internal/controller/ephemeral"
	"mizzen/internal/controller/localpath"
	"mizzen/internal/controller/persistentvolume"
	"mizzen/internal/controller/volumeexpand"
	"mizzen/internal/controller/volumeprotection"
)

// storageControllers lists the controllers of persistent storage: the
// persistentvolume-binder and -expander, pv- and pvc-protection, ephemeral volumes, and the bundled
// local-path provisioner (mizzen's own, like k3s's; disable it with
// --controllers=*,-local-path-provisioner).
func storageControllers() []Descriptor {
	return []Descriptor{
		{Name: "persistentvolume-binder-controller", Aliases: []string{"persistentvolume-binder"}, Account: "persistent-volume-binder", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := persistentvolume.New(cc.Client, core.PersistentVolumeClaims(), core.PersistentVolumes(), cc.Informers.Storage().V1().StorageClasses())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "persistentvolume-expander-controller", Aliases: []string{"persistentvolume-expander"}, Account: "expand-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			c := volumeexpand.New(cc.Client, cc.Informers.Core().V1().PersistentVolumeClaims(), cc.Informers.Storage().V1().StorageClasses())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "persistentvolume-protection-controller", Aliases: []string{"pv-protection"}, Account: "pv-protection-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			c := volumeprotection.NewPV(cc.Client, cc.Informers.Core().V1().PersistentVolumes())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "persistentvolumeclaim-protection-controller", Aliases: []string{"pvc-protection"}, Account: "pvc-protection-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := volumeprotection.NewPVC(cc.Client, core.PersistentVolumeClaims(), core.Pods())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "ephemeral-volume-controller", Aliases: []string{"ephemeral-volume"}, Account: "ephemeral-volume-controller", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := ephemeral.New(cc.Client, core.Pods(), core.PersistentVolumeClaims())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
		{Name: "local-path-provisioner-controller", Aliases: []string{"local-path-provisioner"}, Account: "local-path-provisioner", Start: func(ctx context.Context, cc *ControllerContext) error {
			core := cc.Informers.Core().V1()
			c := localpath.New(cc.Client, core.PersistentVolumeClaims(), core.PersistentVolumes(),
				cc.Informers.Storage().V1().StorageClasses(), core.Nodes())
			go c.Run(ctx, cc.Options.ConcurrentSyncs)
			return nil
		}},
	}
}
