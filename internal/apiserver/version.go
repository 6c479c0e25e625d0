package apiserver

import (
	"runtime"
	"strconv"
)

func goVersion() string     { return runtime.Version() }
func platform() string      { return runtime.GOOS + "/" + runtime.GOARCH }
func fmtUint(n uint) string { return strconv.FormatUint(uint64(n), 10) }
