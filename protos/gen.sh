#!/bin/sh
# Regenerates the Go code for every .proto under protos/.
#
# Needs protoc (3.21 or newer) and the Go toolchain; protoc-gen-go is run at a
# pinned version through `go run`, so nothing else has to be installed. The
# generated *.pb.go files are committed: CI does not have protoc.
#
# Usage: protos/gen.sh   (from anywhere)
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# protoc runs plugins as executables; this wrapper runs the pinned
# protoc-gen-go through `go run` with protoc's stdin and stdout.
plugin_dir=$(mktemp -d)
trap 'rm -rf "$plugin_dir"' EXIT
cat >"$plugin_dir/protoc-gen-go" <<'WRAPPER'
#!/bin/sh
exec go run google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12 "$@"
WRAPPER
chmod +x "$plugin_dir/protoc-gen-go"

# etcd's kv.proto (mvccpb), imported by the feed, and auth.proto (authpb),
# imported by the raft entries, from the module cache.
etcd_api=$(go list -m -f '{{.Dir}}' go.etcd.io/etcd/api/v3)
# raft's raft.proto (raftpb), imported by the cluster state.
raft_mod=$(go list -m -f '{{.Dir}}' go.etcd.io/raft/v3)

protoc \
	--plugin=protoc-gen-go="$plugin_dir/protoc-gen-go" \
	--proto_path=protos \
	--proto_path="$etcd_api/mvccpb" \
	--proto_path="$etcd_api/authpb" \
	--proto_path="$raft_mod/raftpb" \
	--go_out=protos \
	--go_opt=paths=source_relative \
	--go_opt=Mkv.proto=go.etcd.io/etcd/api/v3/mvccpb \
	--go_opt=Mauth.proto=go.etcd.io/etcd/api/v3/authpb \
	--go_opt=Mraft.proto=go.etcd.io/raft/v3/raftpb \
	protos/revd/journal/v1/journal.proto \
	protos/revd/journal/v1/export.proto \
	protos/revd/maintenance/v1/maintenance.proto \
	protos/revd/feed/v1/feed.proto \
	protos/revd/raft/v1/entry.proto
