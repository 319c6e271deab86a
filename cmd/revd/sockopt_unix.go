//go:build unix

package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// socketControl sets SO_REUSEADDR and SO_REUSEPORT on a listener's socket
// before it binds, as etcd's --socket-reuse-address and --socket-reuse-port
// do (Go sets SO_REUSEADDR on its listeners anyway).
func socketControl(reuseAddress, reusePort bool) func(network, address string, rc syscall.RawConn) error {
	if !reuseAddress && !reusePort {
		return nil
	}
	return func(_, _ string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			if reuseAddress {
				err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			}
			if err == nil && reusePort {
				err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		})
		if cerr != nil {
			return cerr
		}
		return err
	}
}
