package main

import (
	"net/url"
	"testing"
)

// --socket-reuse-port lets a second server bind the client port while the
// first holds it (etcd's flag); without it the second is refused.
func TestSocketReusePort(t *testing.T) {
	first, err := bind(&config{clientURLs: []*url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}, reusePort: true})
	if err != nil {
		t.Fatal(err)
	}
	defer first.close()
	taken := &url.URL{Scheme: "http", Host: first.client[0].Addr().String()}
	if p, err := bind(&config{clientURLs: []*url.URL{taken}}); err == nil {
		p.close()
		t.Fatalf("bound %s twice without --socket-reuse-port", taken.Host)
	}
	second, err := bind(&config{clientURLs: []*url.URL{taken}, reusePort: true, reuseAddress: true})
	if err != nil {
		t.Fatalf("with --socket-reuse-port: %v", err)
	}
	second.close()
}
