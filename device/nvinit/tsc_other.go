//go:build !amd64

package nvinit

func readTSC() uint64 { return 0 }

const haveTSC = false
