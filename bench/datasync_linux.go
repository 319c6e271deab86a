package main

import (
	"os"
	"syscall"
)

// dataSync is fdatasync(2), as etcd's WAL and Pebble's use on Linux.
func dataSync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
