//go:build tools

// Package tools pins h2spec, the HTTP/2 conformance tester that
// tests/hostile runs against revd and etcd 3.7.3 (TestH2spec), so that the
// test can build it from the Go module proxy:
//
//	go build -o bin/ github.com/summerwind/h2spec/cmd/h2spec
package tools

import (
	_ "github.com/summerwind/h2spec/cmd/h2spec"
)
