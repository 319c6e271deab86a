//go:build !linux

package grpcwire

import (
	"syscall"
	"time"
)

// setUserTimeoutRaw does nothing where TCP_USER_TIMEOUT does not exist (as
// in grpc-go).
func setUserTimeoutRaw(syscall.RawConn, time.Duration) {}
