//go:build !unix

package journal

import "github.com/cockroachdb/pebble/v2/vfs"

// mapFile is unix-only; elsewhere the mark is written with WriteAt.
func mapFile(vfs.File, int) []byte { return nil }

func unmapFile([]byte) {}

func syncFile(f vfs.File, _ []byte) error { return f.Sync() }
