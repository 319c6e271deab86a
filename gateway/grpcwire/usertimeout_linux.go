package grpcwire

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func setUserTimeoutRaw(rc syscall.RawConn, d time.Duration) {
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	})
}
