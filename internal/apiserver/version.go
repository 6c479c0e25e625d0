package apiserver

import "strconv"

func fmtUint(n uint) string { return strconv.FormatUint(uint64(n), 10) }
