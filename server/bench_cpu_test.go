package server

import (
	"syscall"
	"testing"
	"time"
)

// cpuMeter reports a benchmark's CPU time per op (user and system time of
// the whole process, every goroutine's): on a machine shared with other
// work, a steadier measure of the cost of an op than its wall time.
type cpuMeter struct{ start time.Duration }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuMeter { return cpuMeter{start: cpuTime()} }

func (m cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(cpuTime()-m.start)/float64(b.N), "cpu-ns/op")
}
