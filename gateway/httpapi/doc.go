// Package httpapi serves the plain HTTP endpoints etcd serves on its client
// port next to gRPC: /health, /livez, /readyz (with their per-check
// subpaths and ?verbose, ?exclude=, ?serializable=true) and /version, with
// etcd's bodies, status codes and CORS headers, so that load balancers,
// Kubernetes probes and scripts that poll etcd poll revd alike.
//
// Split shares one listener between the two protocols: it reads the first
// bytes of each new connection, hands those that start with HTTP/2's client
// preface (gRPC) to one listener and the others (HTTP/1.x) to another, and
// replays the bytes it read. It does so on a goroutine per new connection,
// so a client that sends nothing holds up no other; established
// connections pay nothing.
//
// Gateway is etcd's JSON gateway (/v3/...), as etcd builds it: etcd's
// generated grpc-gateway handlers calling the server's own gRPC server
// (cmd/revd connects them in process).
//
// Handler puts etcd's access controller in front of them (access.go): the
// host whitelist over plain HTTP (--host-whitelist), CORS headers (--cors),
// and, over TLS with client certificates and authentication on, the
// refusal of gateway requests whose certificate names a user.
//
// /metrics is gateway/metrics' (Options.Metrics). Not served (404, as etcd
// answers unknown paths): /debug/vars.
package httpapi
