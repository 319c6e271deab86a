//go:build !linux

package proc

import "errors"

// EvictPageCache is Linux's posix_fadvise; elsewhere it fails.
func EvictPageCache(string) (int64, error) {
	return 0, errors.New("proc: evicting a directory's cached pages needs Linux")
}
