//go:build tools

// Package tools pins etcd 3.7.3, etcdctl and etcd's benchmark tool so that
// tests and the benchmark harness can build them from the Go module proxy:
//
//	go build -o bin/ go.etcd.io/etcd/server/v3 go.etcd.io/etcd/etcdctl/v3
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
