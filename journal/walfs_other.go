//go:build !linux

package journal

import "github.com/cockroachdb/pebble/v2/vfs"

// extend is Linux-only; elsewhere Pebble's own preallocation is used.
func extend(vfs.File, int64, int64) (bool, error) { return false, nil }
