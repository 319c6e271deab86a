// Package serverproc runs etcd and revd server processes on free loopback
// ports: start, wait until the server answers, restart on the same ports
// and data directory, stop. It is the one implementation behind the tests'
// harness (tests/testutil) and the benchmark harness (bench/internal/proc),
// which add, respectively, testing.TB helpers and /proc measurements.
//
// A server is ready when it answers a Range (etcd: and reports its storage
// version, which it decides just after it starts serving, so that every
// etcd answers Status alike). Start picks the ports itself and tries once
// more if one was taken between choosing and binding it.
package serverproc
