//go:build !unix

package main

import (
	"errors"
	"syscall"
)

// socketControl: the socket options are not supported here.
func socketControl(reuseAddress, reusePort bool) func(network, address string, rc syscall.RawConn) error {
	if !reuseAddress && !reusePort {
		return nil
	}
	return func(string, string, syscall.RawConn) error {
		return errors.New("--socket-reuse-address and --socket-reuse-port are not supported on this system")
	}
}
