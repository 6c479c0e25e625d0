package core

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"mizzen/internal/registry/validname"
)

// Volumes of a pod spec and the containers' mounts of them.

// validateVolumes checks names and sources and returns the set of valid volume names.
func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range volumes {
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(namePath, v.Name))
		default:
			msgs := validname.IsDNS1123Label(v.Name)
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(namePath, v.Name, msg))
			}
			if len(msgs) == 0 {
				names.Insert(v.Name)
			}
		}
		errs = append(errs, validateVolumeSource(&v.VolumeSource, idxPath)...)
	}
	return names, errs
}

// validateVolumeSource checks that exactly one source is given and the fields of the
// common ones that are required.
func validateVolumeSource(src *corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := 0
	more := func(name string) {
		set++
		if set > 1 {
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
		}
	}
	if src.HostPath != nil {
		more("hostPath")
		if src.HostPath.Path == "" {
			errs = append(errs, field.Required(fldPath.Child("hostPath", "path"), ""))
		}
		if t := src.HostPath.Type; t != nil && !validHostPathTypes.Has(*t) {
			errs = append(errs, field.NotSupported(fldPath.Child("hostPath", "type"), *t, sets.List(validHostPathTypes)))
		}
	}
	if src.EmptyDir != nil {
		more("emptyDir")
		if m := src.EmptyDir.Medium; m != corev1.StorageMediumDefault && m != corev1.StorageMediumMemory && m != corev1.StorageMediumHugePages && !strings.HasPrefix(string(m), "HugePages-") {
			errs = append(errs, field.NotSupported(fldPath.Child("emptyDir", "medium"), m, []string{"", "Memory", "HugePages"}))
		}
		if q := src.EmptyDir.SizeLimit; q != nil && q.Sign() < 0 {
			errs = append(errs, field.Invalid(fldPath.Child("emptyDir", "sizeLimit"), q.String(), "must be greater than or equal to 0"))
		}
	}
	if src.Secret != nil {
		more("secret")
		if src.Secret.SecretName == "" {
			errs = append(errs, field.Required(fldPath.Child("secret", "secretName"), ""))
		}
		errs = append(errs, validateFileMode(src.Secret.DefaultMode, fldPath.Child("secret", "defaultMode"))...)
		errs = append(errs, validateKeyToPaths(src.Secret.Items, fldPath.Child("secret", "items"))...)
	}
	if src.ConfigMap != nil {
		more("configMap")
		if src.ConfigMap.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("configMap", "name"), ""))
		}
		errs = append(errs, validateFileMode(src.ConfigMap.DefaultMode, fldPath.Child("configMap", "defaultMode"))...)
		errs = append(errs, validateKeyToPaths(src.ConfigMap.Items, fldPath.Child("configMap", "items"))...)
	}
	if src.PersistentVolumeClaim != nil {
		more("persistentVolumeClaim")
		if src.PersistentVolumeClaim.ClaimName == "" {
			errs = append(errs, field.Required(fldPath.Child("persistentVolumeClaim", "claimName"), ""))
		}
	}
	if src.NFS != nil {
		more("nfs")
		if src.NFS.Server == "" {
			errs = append(errs, field.Required(fldPath.Child("nfs", "server"), ""))
		}
		if src.NFS.Path == "" {
			errs = append(errs, field.Required(fldPath.Child("nfs", "path"), ""))
		} else if !path.IsAbs(src.NFS.Path) {
			errs = append(errs, field.Invalid(fldPath.Child("nfs", "path"), src.NFS.Path, "must be an absolute path"))
		}
	}
	if src.DownwardAPI != nil {
		more("downwardAPI")
		errs = append(errs, validateFileMode(src.DownwardAPI.DefaultMode, fldPath.Child("downwardAPI", "defaultMode"))...)
		errs = append(errs, validateDownwardAPIFiles(src.DownwardAPI.Items, fldPath.Child("downwardAPI", "items"))...)
	}
	if src.Projected != nil {
		more("projected")
		errs = append(errs, validateFileMode(src.Projected.DefaultMode, fldPath.Child("projected", "defaultMode"))...)
		errs = append(errs, validateProjectedSources(src.Projected.Sources, fldPath.Child("projected", "sources"))...)
	}
	if src.CSI != nil {
		more("csi")
		if src.CSI.Driver == "" {
			errs = append(errs, field.Required(fldPath.Child("csi", "driver"), ""))
		}
	}
	if src.Ephemeral != nil {
		more("ephemeral")
		if t := src.Ephemeral.VolumeClaimTemplate; t == nil {
			errs = append(errs, field.Required(fldPath.Child("ephemeral", "volumeClaimTemplate"), ""))
		} else {
			errs = append(errs, validatePVCSpec(&t.Spec, fldPath.Child("ephemeral", "volumeClaimTemplate", "spec"))...)
		}
	}
	if src.Image != nil {
		more("image")
	}
	// The remaining in-tree sources are only counted.
	for _, other := range []struct {
		name string
		set  bool
	}{
		{"gcePersistentDisk", src.GCEPersistentDisk != nil}, {"awsElasticBlockStore", src.AWSElasticBlockStore != nil},
		{"gitRepo", src.GitRepo != nil}, {"iscsi", src.ISCSI != nil}, {"glusterfs", src.Glusterfs != nil},
		{"rbd", src.RBD != nil}, {"flexVolume", src.FlexVolume != nil}, {"cinder", src.Cinder != nil},
		{"cephfs", src.CephFS != nil}, {"flocker", src.Flocker != nil}, {"fc", src.FC != nil},
		{"azureFile", src.AzureFile != nil}, {"vsphereVolume", src.VsphereVolume != nil},
		{"quobyte", src.Quobyte != nil}, {"azureDisk", src.AzureDisk != nil},
		{"photonPersistentDisk", src.PhotonPersistentDisk != nil}, {"portworxVolume", src.PortworxVolume != nil},
		{"scaleIO", src.ScaleIO != nil}, {"storageos", src.StorageOS != nil},
	} {
		if other.set {
			more(other.name)
		}
	}
	if set == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a volume type"))
	}
	return errs
}

var validHostPathTypes = sets.New(corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate,
	corev1.HostPathDirectory, corev1.HostPathFileOrCreate, corev1.HostPathFile,
	corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev)

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0777) {
		return field.ErrorList{field.Invalid(fldPath, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, kp := range items {
		at := func(name string) *field.Path { return fldPath.Index(i).Child(name) }
		if kp.Key == "" {
			errs = append(errs, field.Required(at("key"), ""))
		}
		errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateLocalRelativePath(kp.Path, p) }, func() *field.Path { return at("path") })...)
		errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateFileMode(kp.Mode, p) }, func() *field.Path { return at("mode") })...)
	}
	return errs
}

// pathOnError runs validate with no path and, only when it finds something, again
// with path(): valid fields then cost no path, where building each field's path
// first cost every pod admitted dozens of allocations. validate must use its path
// only in the errors it returns.
func pathOnError(validate func(*field.Path) field.ErrorList, path func() *field.Path) field.ErrorList {
	if len(validate(nil)) == 0 {
		return nil
	}
	return validate(path())
}

// validateLocalRelativePath requires a relative path that does not step out with "..".
func validateLocalRelativePath(p string, fldPath *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(fldPath, p, "must not contain '..'"))
			break
		}
	}
	return errs
}

func validateVolumeMounts(mounts []corev1.VolumeMount, volumes sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		idxPath := fldPath.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		} else if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(idxPath.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idxPath.Child("mountPath"), ""))
		} else if paths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(idxPath.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
		if m.SubPath != "" {
			errs = append(errs, validateSubPath(m.SubPath, idxPath.Child("subPath"))...)
		}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional:
			default:
				errs = append(errs, field.NotSupported(idxPath.Child("mountPropagation"), *m.MountPropagation,
					[]corev1.MountPropagationMode{corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone}))
			}
		}
	}
	return errs
}

// validateVolumeDevices checks a container's raw block devices as upstream: each names
// a volume once, at a unique path, and neither the volume nor the path is also mounted.
func validateVolumeDevices(devices []corev1.VolumeDevice, mounts []corev1.VolumeMount, volumes sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mountNames, mountPaths := sets.New[string](), sets.New[string]()
	for _, m := range mounts {
		mountNames.Insert(m.Name)
		mountPaths.Insert(m.MountPath)
	}
	names, paths := sets.New[string](), sets.New[string]()
	for i, d := range devices {
		idxPath := fldPath.Index(i)
		switch {
		case d.Name == "":
			errs = append(errs, field.Required(idxPath.Child("name"), ""))
		case !volumes.Has(d.Name):
			errs = append(errs, field.NotFound(idxPath.Child("name"), d.Name))
		case names.Has(d.Name):
			errs = append(errs, field.Invalid(idxPath.Child("name"), d.Name, "must be unique"))
		case mountNames.Has(d.Name):
			errs = append(errs, field.Invalid(idxPath.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		names.Insert(d.Name)
		switch {
		case d.DevicePath == "":
			errs = append(errs, field.Required(idxPath.Child("devicePath"), ""))
		case paths.Has(d.DevicePath):
			errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "must be unique"))
		case slices.Contains(strings.Split(d.DevicePath, "/"), ".."):
			errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "can not contain '..'"))
		case mountPaths.Has(d.DevicePath):
			errs = append(errs, field.Invalid(idxPath.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
		}
		paths.Insert(d.DevicePath)
	}
	return errs
}

func validateSubPath(p string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(fldPath, p, "must not contain '..'"))
			break
		}
	}
	return errs
}

func validateDownwardAPIFiles(items []corev1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range items {
		at := func(name string) *field.Path { return fldPath.Index(i).Child(name) }
		errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateLocalRelativePath(f.Path, p) }, func() *field.Path { return at("path") })...)
		errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateFileMode(f.Mode, p) }, func() *field.Path { return at("mode") })...)
		switch {
		case f.FieldRef != nil && f.ResourceFieldRef != nil:
			errs = append(errs, field.Invalid(fldPath.Index(i), "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case f.FieldRef != nil && f.FieldRef.FieldPath == "":
			errs = append(errs, field.Required(fldPath.Index(i).Child("fieldRef", "fieldPath"), ""))
		case f.ResourceFieldRef != nil && f.ResourceFieldRef.ContainerName == "":
			errs = append(errs, field.Required(fldPath.Index(i).Child("resourceFieldRef", "containerName"), ""))
		case f.FieldRef == nil && f.ResourceFieldRef == nil:
			errs = append(errs, field.Required(fldPath.Index(i), "one of fieldRef and resourceFieldRef is required"))
		}
	}
	return errs
}

// validateProjectedSources requires one kind per source and the fields each kind
// cannot do without; service account tokens live between ten minutes and 2^32 s.
func validateProjectedSources(sources []corev1.VolumeProjection, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, src := range sources {
		// Paths are built for errors only (see pathOnError).
		at := func(kind, name string) *field.Path { return fldPath.Index(i).Child(kind, name) }
		n := 0
		if s := src.Secret; s != nil {
			n++
			if s.Name == "" {
				errs = append(errs, field.Required(at("secret", "name"), ""))
			}
			errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateKeyToPaths(s.Items, p) }, func() *field.Path { return at("secret", "items") })...)
		}
		if c := src.ConfigMap; c != nil {
			n++
			if c.Name == "" {
				errs = append(errs, field.Required(at("configMap", "name"), ""))
			}
			errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateKeyToPaths(c.Items, p) }, func() *field.Path { return at("configMap", "items") })...)
		}
		if d := src.DownwardAPI; d != nil {
			n++
			errs = append(errs, pathOnError(func(p *field.Path) field.ErrorList { return validateDownwardAPIFiles(d.Items, p) }, func() *field.Path { return at("downwardAPI", "items") })...)
		}
		if tok := src.ServiceAccountToken; tok != nil {
			n++
			if exp := tok.ExpirationSeconds; exp != nil {
				if *exp < 10*60 {
					errs = append(errs, field.Invalid(at("serviceAccountToken", "expirationSeconds"), *exp, "may not specify a duration less than 10 minutes"))
				}
				if *exp > 1<<32 {
					errs = append(errs, field.Invalid(at("serviceAccountToken", "expirationSeconds"), *exp, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			if tok.Path == "" {
				errs = append(errs, field.Required(at("serviceAccountToken", "path"), ""))
			}
		}
		if ctb := src.ClusterTrustBundle; ctb != nil {
			n++
			errs = append(errs, validateClusterTrustBundleProjection(ctb, fldPath.Index(i).Child("clusterTrustBundle"))...)
		}
		if pc := src.PodCertificate; pc != nil {
			n++
			errs = append(errs, validatePodCertificateProjection(pc, fldPath.Index(i).Child("podCertificate"))...)
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(fldPath.Index(i), "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// validateClusterTrustBundleProjection requires a bundle's name or a signer (not
// both), a selector only with a signer, and a path, as upstream.
func validateClusterTrustBundleProjection(ctb *corev1.ClusterTrustBundleProjection, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case ctb.Name != nil && ctb.SignerName != nil:
		errs = append(errs, field.Invalid(fldPath, ctb, "only one of name and signerName may be used"))
	case ctb.Name != nil:
		if *ctb.Name == "" {
			errs = append(errs, field.Required(fldPath.Child("name"), "must be a valid object name"))
		}
		if ctb.LabelSelector != nil {
			errs = append(errs, field.Invalid(fldPath.Child("labelSelector"), ctb.LabelSelector, "labelSelector must be unset if name is specified"))
		}
	case ctb.SignerName != nil:
		if *ctb.SignerName == "" {
			errs = append(errs, field.Required(fldPath.Child("signerName"), "must be a valid signer name"))
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(ctb.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("labelSelector"))...)
	default:
		errs = append(errs, field.Required(fldPath, "either name or signerName must be specified"))
	}
	if ctb.Path == "" {
		errs = append(errs, field.Required(fldPath.Child("path"), ""))
	}
	return errs
}

// podCertificateMaxExpiration bounds a podCertificate projection's
// maxExpirationSeconds: 91 days, or a day for kubernetes.io signers.
func podCertificateMaxExpiration(signer string) int32 {
	if strings.HasPrefix(signer, "kubernetes.io/") {
		return 86400
	}
	return 91 * 86400
}

// validatePodCertificateProjection checks a podCertificate source with upstream's
// messages: a signer, a known key type, a lifetime between an hour and the signer's
// maximum, and at least one file to write.
func validatePodCertificateProjection(pc *corev1.PodCertificateProjection, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pc.SignerName == "" {
		errs = append(errs, field.Required(fldPath.Child("signerName"), ""))
	}
	keyTypes := []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}
	if !slices.Contains(keyTypes, pc.KeyType) {
		errs = append(errs, field.NotSupported(fldPath.Child("keyType"), pc.KeyType, keyTypes))
	}
	if e := pc.MaxExpirationSeconds; e != nil {
		if *e < 3600 {
			errs = append(errs, field.Invalid(fldPath.Child("maxExpirationSeconds"), *e, "if provided, maxExpirationSeconds must be >= 3600"))
		}
		if limit := podCertificateMaxExpiration(pc.SignerName); *e > limit {
			errs = append(errs, field.Invalid(fldPath.Child("maxExpirationSeconds"), *e, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", limit)))
		}
	}
	if pc.CredentialBundlePath == "" && pc.KeyPath == "" && pc.CertificateChainPath == "" {
		errs = append(errs, field.Required(fldPath, "At least one of credentialBundlePath, keyPath, and certificateChainPath must be provided"))
	}
	return errs
}
