//go:build !linux

package main

import "os"

// dataSync falls back to fsync where fdatasync is not available.
func dataSync(f *os.File) error { return f.Sync() }
