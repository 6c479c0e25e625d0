package volume

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
)

// setUpHostPath applies the hostPath type check, creating a directory or an empty
// file for the OrCreate types; the unset type checks nothing.
func setUpHostPath(src *v1.HostPathVolumeSource) error {
	path := src.Path
	typ := v1.HostPathUnset
	if src.Type != nil {
		typ = *src.Type
	}
	info, statErr := os.Stat(path)
	exists := statErr == nil
	fail := func(what string) error { return fmt.Errorf("hostPath type check failed: %s is not a %s", path, what) }
	switch typ {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(path, 0o755)
		}
		if !info.IsDir() {
			return fail("directory")
		}
	case v1.HostPathDirectory:
		if !exists || !info.IsDir() {
			return fail("directory")
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil && !os.IsExist(err) {
				return err
			}
			if f != nil {
				return f.Close()
			}
			return nil
		}
		if !info.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathFile:
		if !exists || !info.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathSocket:
		if !exists || info.Mode()&os.ModeSocket == 0 {
			return fail("socket file")
		}
	case v1.HostPathCharDev:
		if !exists || info.Mode()&os.ModeCharDevice == 0 {
			return fail("character device")
		}
	case v1.HostPathBlockDev:
		if !exists || info.Mode()&os.ModeDevice == 0 || info.Mode()&os.ModeCharDevice != 0 {
			return fail("block device")
		}
	default:
		return fmt.Errorf("hostPath type %q is not supported", typ)
	}
	return nil
}
