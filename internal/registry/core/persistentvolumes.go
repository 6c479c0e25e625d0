package core

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry"
	"mizzen/internal/registry/validname"
)

// storageClassAnnotation is the beta annotation that still wins over
// spec.storageClassName when printing.
const storageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

func persistentVolumesResource() *registry.Resource {
	spec, status := corev1.PersistentVolumeSpec{}.SwaggerDoc(), corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "persistentvolumes",
		Kind:         "PersistentVolume",
		SingularName: "persistentvolume",
		ShortNames:   []string{"pv"},
		New:          func() runtime.Object { return &corev1.PersistentVolume{} },
		NewList:      func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Strategy: strategy[*corev1.PersistentVolume]{
			defaults: defaultPersistentVolume,
			prepareCreate: func(_ context.Context, pv *corev1.PersistentVolume) {
				now := metav1.NewTime(time.Now())
				pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
			},
			validate:       validatePersistentVolume,
			validateUpdate: validatePersistentVolumeUpdate,
		},
		Printer: printerFor([]metav1.TableColumnDefinition{
			registry.NameColumn,
			column("Capacity", "string", spec["capacity"]),
			column("Access Modes", "string", spec["accessModes"]),
			column("Reclaim Policy", "string", spec["persistentVolumeReclaimPolicy"]),
			column("Status", "string", status["phase"]),
			column("Claim", "string", spec["claimRef"]),
			column("StorageClass", "string", "StorageClass of the pv"),
			column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
			column("Reason", "string", status["reason"]),
			registry.AgeColumn,
			wideColumn("VolumeMode", "string", spec["volumeMode"]),
		}, persistentVolumeRow),
		HasStatus: true,
	}
}

func defaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		pv.Spec.VolumeMode = ptrTo(corev1.PersistentVolumeFilesystem)
	}
	// The in-tree sources default as they do inside pods.
	src := &pv.Spec.PersistentVolumeSource
	if hp := src.HostPath; hp != nil && hp.Type == nil {
		hp.Type = ptrTo(corev1.HostPathUnset)
	}
	if r := src.RBD; r != nil {
		if r.RBDPool == "" {
			r.RBDPool = "rbd"
		}
		if r.RadosUser == "" {
			r.RadosUser = "admin"
		}
		if r.Keyring == "" {
			r.Keyring = "/etc/ceph/keyring"
		}
	}
	if i := src.ISCSI; i != nil && i.ISCSIInterface == "" {
		i.ISCSIInterface = "default"
	}
	if d := src.AzureDisk; d != nil {
		defaultVolume(&corev1.Volume{VolumeSource: corev1.VolumeSource{AzureDisk: d}})
	}
	if sc := src.ScaleIO; sc != nil {
		if sc.StorageMode == "" {
			sc.StorageMode = "ThinProvisioned"
		}
		if sc.FSType == "" {
			sc.FSType = "xfs"
		}
	}
	roundResourceList(pv.Spec.Capacity)
}

var supportedAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod}

func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, fldPath *field.Path, requiredDetail string) field.ErrorList {
	if len(modes) == 0 {
		return field.ErrorList{field.Required(fldPath, requiredDetail)}
	}
	var errs field.ErrorList
	rwop := false
	for _, m := range modes {
		switch m {
		case corev1.ReadWriteOncePod:
			rwop = true
		case corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce:
		default:
			errs = append(errs, field.NotSupported(fldPath, m, supportedAccessModes))
		}
	}
	if rwop && len(modes) > 1 {
		errs = append(errs, field.Forbidden(fldPath, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

func validatePositiveQuantity(q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(fldPath, q.String(), "must be greater than zero")}
	}
	return nil
}

func validateVolumeMode(mode *corev1.PersistentVolumeMode, fldPath *field.Path) field.ErrorList {
	if mode == nil || *mode == corev1.PersistentVolumeBlock || *mode == corev1.PersistentVolumeFilesystem {
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, *mode, []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem})}
}

func validateStorageClassName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validname.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validatePersistentVolume(_ context.Context, pv *corev1.PersistentVolume) field.ErrorList {
	specPath := field.NewPath("spec")
	spec := &pv.Spec
	errs := validateAccessModes(spec.AccessModes, specPath.Child("accessModes"), "")

	capPath := specPath.Child("capacity")
	if len(spec.Capacity) == 0 {
		errs = append(errs, field.Required(capPath, ""))
	}
	if _, ok := spec.Capacity[corev1.ResourceStorage]; len(spec.Capacity) > 0 && (!ok || len(spec.Capacity) > 1) {
		errs = append(errs, field.NotSupported(capPath, spec.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for _, name := range sortedResourceNames(spec.Capacity) {
		errs = append(errs, validatePositiveQuantity(spec.Capacity[name], capPath.Key(string(name)))...)
	}

	switch spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("persistentVolumeReclaimPolicy"), spec.PersistentVolumeReclaimPolicy,
			[]corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain}))
	}
	if spec.StorageClassName != "" {
		errs = append(errs, validateStorageClassName(spec.StorageClassName, specPath.Child("storageClassName"))...)
	}
	errs = append(errs, validateVolumeMode(spec.VolumeMode, specPath.Child("volumeMode"))...)
	errs = append(errs, validatePersistentVolumeSource(&spec.PersistentVolumeSource, specPath)...)
	return errs
}

// validatePersistentVolumeSource requires exactly one source and the key fields of
// the ones a local cluster uses.
func validatePersistentVolumeSource(src *corev1.PersistentVolumeSource, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	count := func(set bool, name string) bool {
		if !set {
			return false
		}
		n++
		if n > 1 {
			errs = append(errs, field.Forbidden(specPath.Child(name), "may not specify more than 1 volume type"))
		}
		return true
	}
	if count(src.HostPath != nil, "hostPath") && src.HostPath.Path == "" {
		errs = append(errs, field.Required(specPath.Child("hostPath", "path"), ""))
	}
	if count(src.Local != nil, "local") && src.Local.Path == "" {
		errs = append(errs, field.Required(specPath.Child("local", "path"), ""))
	}
	if count(src.NFS != nil, "nfs") {
		if src.NFS.Server == "" {
			errs = append(errs, field.Required(specPath.Child("nfs", "server"), ""))
		}
		if src.NFS.Path == "" {
			errs = append(errs, field.Required(specPath.Child("nfs", "path"), ""))
		}
	}
	if count(src.CSI != nil, "csi") {
		if src.CSI.Driver == "" {
			errs = append(errs, field.Required(specPath.Child("csi", "driver"), ""))
		}
		if src.CSI.VolumeHandle == "" {
			errs = append(errs, field.Required(specPath.Child("csi", "volumeHandle"), ""))
		}
	}
	for _, other := range []struct {
		set  bool
		name string
	}{
		{src.GCEPersistentDisk != nil, "gcePersistentDisk"}, {src.AWSElasticBlockStore != nil, "awsElasticBlockStore"},
		{src.Glusterfs != nil, "glusterfs"}, {src.RBD != nil, "rbd"}, {src.ISCSI != nil, "iscsi"},
		{src.Cinder != nil, "cinder"}, {src.CephFS != nil, "cephfs"}, {src.FC != nil, "fc"},
		{src.Flocker != nil, "flocker"}, {src.FlexVolume != nil, "flexVolume"}, {src.AzureFile != nil, "azureFile"},
		{src.VsphereVolume != nil, "vsphereVolume"}, {src.Quobyte != nil, "quobyte"}, {src.AzureDisk != nil, "azureDisk"},
		{src.PhotonPersistentDisk != nil, "photonPersistentDisk"}, {src.PortworxVolume != nil, "portworxVolume"},
		{src.ScaleIO != nil, "scaleIO"}, {src.StorageOS != nil, "storageos"},
	} {
		count(other.set, other.name)
	}
	if n == 0 {
		errs = append(errs, field.Required(specPath, "must specify a volume type"))
	}
	return errs
}

// validatePersistentVolumeUpdate keeps the volume source and mode fixed.
func validatePersistentVolumeUpdate(_ context.Context, pv, old *corev1.PersistentVolume) field.ErrorList {
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.NodeAffinity, old.Spec.NodeAffinity, field.NewPath("nodeAffinity"))...)
	}
	return errs
}

func persistentVolumeRow(pv *corev1.PersistentVolume) []interface{} {
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	class := pv.Spec.StorageClassName
	if a, ok := pv.Annotations[storageClassAnnotation]; ok {
		class = a
	}
	vac := "<unset>"
	if pv.Spec.VolumeAttributesClassName != nil {
		vac = *pv.Spec.VolumeAttributesClassName
	}
	mode := "<unset>"
	if pv.Spec.VolumeMode != nil {
		mode = string(*pv.Spec.VolumeMode)
	}
	return []interface{}{pv.Name, size.String(), accessModesString(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase, claim, class, vac, pv.Status.Reason, registry.Age(pv.CreationTimestamp), mode}
}
