package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args, environ []string) (*config, error) {
	t.Helper()
	return parseFlags(append([]string{"--data-dir=" + t.TempDir()}, args...), environ, io.Discard)
}

func mustParse(t *testing.T, args, environ []string) *config {
	t.Helper()
	cfg, err := parse(t, args, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func hasLine(lines []string, want string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) })
}

func TestEnvironmentSetsUnsetFlags(t *testing.T) {
	cfg := mustParse(t, []string{"--max-txn-ops=7"}, []string{
		"PATH=/bin",
		"ETCD_NAME=from-env",
		"ETCD_GRPC_KEEPALIVE_MIN_TIME=9s",
		"ETCD_CLIENT_CERT_AUTH=",      // empty: sets nothing
		"ETCD_NATS_SUBJECT_PREFIX=kv", // revd's own flags take the prefix too
		"ETCD_NATS_USER=u", "ETCD_NATS_PASSWORD=pw1",
		"ETCD_NO_SUCH_FLAG=1",
		"ETCD_VERSION=1",
	})
	if cfg.name != "from-env" || cfg.keepaliveMinTime != 9*time.Second || cfg.natsSubjectRoot != "kv" || cfg.maxTxnOps != 7 {
		t.Errorf("name %q, min time %v, subject prefix %q, max txn ops %d", cfg.name, cfg.keepaliveMinTime, cfg.natsSubjectRoot, cfg.maxTxnOps)
	}
	if cfg.tls.ClientCertAuth {
		t.Error("an empty ETCD_CLIENT_CERT_AUTH turned client certificates on")
	}
	if hasLine(cfg.notes, "pw1") || !hasLine(cfg.notes, "ETCD_NATS_PASSWORD=(hidden)") {
		t.Errorf("the password is shown, or its variable not named, in %q", cfg.notes)
	}
	if !hasLine(cfg.notes, "recognized and used environment variable ETCD_NAME=from-env") {
		t.Errorf("notes %q", cfg.notes)
	}
	if !hasLine(cfg.warnings, "unrecognized environment variable ETCD_NO_SUCH_FLAG=1") ||
		!hasLine(cfg.warnings, "cannot set special environment variable ETCD_VERSION") {
		t.Errorf("warnings %q", cfg.warnings)
	}
}

func TestEnvironmentRefusals(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		environ string
		want    string
	}{
		{nil, "ETCD_MAX_TXN_OPS=many", `invalid value "many" for ETCD_MAX_TXN_OPS: parse error`},
		{[]string{"--name=a"}, "ETCD_NAME=b", "conflicting environment variable ETCD_NAME is shadowed by corresponding command-line flag --name"},
		{[]string{"--name=a"}, "ETCD_NAME=", "conflicting environment variable ETCD_NAME is shadowed"},
		{nil, "ETCD_INITIAL_CLUSTER_STATE=bogus", `invalid value "bogus" for ETCD_INITIAL_CLUSTER_STATE: invalid value`},
		// The values are checked once set, as flags are.
		{nil, "ETCD_LOG_LEVEL=loud", `--log-level: "loud" is not one of`},
	} {
		_, err := parse(t, tc.args, []string{tc.environ})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v with %s: error %v, want %q", tc.args, tc.environ, err, tc.want)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "etcd.conf.yml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The file's keys become the flags of the same name; the command line and
// the environment are ignored, as etcd ignores them.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, `
name: from-file
data-dir: `+dir+`
listen-client-urls: http://127.0.0.1:23790,http://127.0.0.1:23791
advertise-client-urls: http://example.com:2379
listen-peer-urls: http://127.0.0.1:23800
initial-advertise-peer-urls: http://127.0.0.1:23800
initial-cluster: from-file=http://127.0.0.1:23800
max-txn-ops: 3
quota-backend-bytes: 1048576
grpc-keepalive-min-time: 3000000000
auto-compaction-retention: 1
cipher-suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]
enable-pprof: true
socket-options:
  reuse-port: true
client-transport-security:
  cert-file: /c.pem
  key-file: /k.pem
  client-cert-auth: true
  trusted-ca-file: /ca.pem
  allowed-hostname: [a.example, b.example]
  client-cert-file: /cc.pem
nats-listen: "off"
v2-deprecation: write-only
no-such-key: 1
`)
	cfg, err := parseFlags([]string{"--config-file=" + path, "--name=from-flag"}, []string{"ETCD_MAX_REQUEST_BYTES=10"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.name != "from-file" || cfg.dataDir != dir || cfg.maxTxnOps != 3 || cfg.quotaBytes != 1<<20 ||
		cfg.keepaliveMinTime != 3*time.Second || cfg.autoCompaction == nil || !cfg.enablePprof || !cfg.reusePort ||
		cfg.natsListen != "off" {
		t.Errorf("config %+v", cfg)
	}
	if len(cfg.clientURLs) != 2 || cfg.clientURLs[1].Host != "127.0.0.1:23791" || !slices.Equal(cfg.advertiseURLs, []string{"http://example.com:2379"}) {
		t.Errorf("client URLs %v, advertised %v", cfg.clientURLs, cfg.advertiseURLs)
	}
	tls := cfg.tls
	if tls.CertFile != "/c.pem" || tls.KeyFile != "/k.pem" || !tls.ClientCertAuth || tls.TrustedCAFile != "/ca.pem" ||
		!slices.Equal(tls.AllowedHostnames, []string{"a.example", "b.example"}) || len(tls.CipherSuites) != 2 {
		t.Errorf("TLS %+v", tls)
	}
	if cfg.maxRequestBytes == 10 {
		t.Error("ETCD_MAX_REQUEST_BYTES was read along with a configuration file")
	}
	if cl := cfg.cluster; len(cl.listenPeer) != 1 || cl.listenPeer[0].Host != "127.0.0.1:23800" ||
		!slices.Equal(cl.InitialCluster["from-file"], []string{"http://127.0.0.1:23800"}) {
		t.Errorf("cluster %+v", cl)
	}
	for _, want := range []string{
		"config file: v2-deprecation is ignored",
		"config file: unknown key no-such-key is ignored",
		"--client-cert-file is ignored",
	} {
		if !hasLine(cfg.warnings, want) {
			t.Errorf("no warning %q in %q", want, cfg.warnings)
		}
	}
	if !hasLine(cfg.notes, "loaded server configuration from "+path) {
		t.Errorf("notes %q", cfg.notes)
	}

	// Keys match whatever their case, as in etcd; listening without an
	// advertised URL advertises etcd's default, as etcd does from a file;
	// a progress interval of 0 is the default; etcd's ignored keys of the
	// right type are taken; zap's levels above error are error.
	cfg, err = parseFlags([]string{"--config-file=" + writeFile(t, `
Name: cased
DATA-DIR: `+dir+`
Client-Transport-Security:
  Cert-File: /c.pem
  Key-File: /k.pem
listen-client-urls: http://127.0.0.1:23790
watch-progress-notify-interval: 0
log-outputs: [stderr, `+dir+`/revd.log]
enable-log-rotation: true
log-rotation-config-json: '{"maxsize": 7}'
snapshot-count: 10000
log-level: fatal
peer-transport-security:
  cert-file: /p.pem
  client-cert-auth: true
`)}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.name != "cased" || cfg.dataDir != dir || cfg.tls.CertFile != "/c.pem" || cfg.watchProgressInterval != defaultProgressInterval ||
		!slices.Equal(cfg.advertiseURLs, []string{"http://localhost:2379"}) || cfg.logLevel != slog.LevelError ||
		!cfg.log.rotate || cfg.log.rotation.Logger == nil || cfg.log.rotation.MaxSize != 7 {
		t.Errorf("config %+v", cfg)
	}

	// revd's NATS cluster keys, beside etcd's cluster ones.
	cfg, err = parseFlags([]string{"--config-file=" + writeFile(t, `
name: m1
data-dir: `+dir+`
listen-peer-urls: http://127.0.0.1:23800
initial-advertise-peer-urls: http://127.0.0.1:23800
initial-cluster: m1=http://127.0.0.1:23800,m2=http://127.0.0.1:23801
nats-cluster-listen: 127.0.0.1:23820
nats-routes: nats-route://127.0.0.1:23821
`)}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.natsCluster != "127.0.0.1:23820" || !slices.Equal(cfg.natsRoutes, []string{"nats-route://127.0.0.1:23821"}) ||
		len(cfg.cluster.InitialCluster) != 2 {
		t.Errorf("NATS cluster %q routes %v, initial cluster %v", cfg.natsCluster, cfg.natsRoutes, cfg.cluster.InitialCluster)
	}

	// ETCD_CONFIG_FILE names the file when the flag does not.
	cfg, err = parseFlags(nil, []string{"ETCD_CONFIG_FILE=" + path}, io.Discard)
	if err != nil || cfg.name != "from-file" {
		t.Errorf("ETCD_CONFIG_FILE: %v, %+v", err, cfg)
	}
}

func TestConfigFileRefusals(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		// etcd's durations are nanoseconds in its file.
		{"grpc-keepalive-min-time: 5s", "grpc-keepalive-min-time of type time.Duration"},
		{"max-txn-ops: -1", "max-txn-ops of type uint"},
		{"name: [a, b]", "name of type string"},
		{"client-transport-security: yes", "client-transport-security of type main.securityConfig"},
		{"client-transport-security:\n  allowed-cn: [admin]", "allowed-cn is not supported"},
		{"name: a\n  b: c", "yaml: line 2"},
		// The values are checked as flags are.
		{"auto-compaction-mode: sometimes", `--auto-compaction-mode: "sometimes" is not one of periodic, revision`},
		{"listen-client-urls: 127.0.0.1:2379", "is not a URL like"},
		{"listen-client-urls: http://example.com:2379", "expected IP in URL for binding (http://example.com:2379)"},
		{"initial-cluster: other=http://127.0.0.1:2380", `couldn't find local name "default"`},
		// The cluster's keys take etcd's types.
		{"snapshot-count: many", "snapshot-count of type uint64"},
		{"heartbeat-interval: -1", "heartbeat-interval of type uint"},
		{"pre-vote: maybe", "pre-vote of type bool"},
		{"peer-transport-security: yes", "peer-transport-security of type main.peerSecurityConfig"},
		{"heartbeat-interval: 300\nelection-timeout: 1000", "--election-timeout[1000ms] should be at least as 5 times as --heartbeat-interval[300ms]"},
		// etcd's keys revd ignores still take etcd's types.
		{"backend-batch-limit: many", "backend-batch-limit: many is not a value etcd takes"},
		// An empty string is taken as it is where etcd takes it so.
		{`auto-compaction-mode: ""`, `--auto-compaction-mode: "" is not one of periodic, revision`},
		{"enable-log-rotation: true\nlog-outputs: [/tmp/revd.log]\nlog-rotation-config-json: ''", "improperly formatted log rotation config: unexpected end of JSON input"},
		{"enable-log-rotation: yes please", "enable-log-rotation of type bool"},
	} {
		_, err := parseFlags([]string{"--config-file=" + writeFile(t, tc.content)}, nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.content, err, tc.want)
		}
	}
	if _, err := parseFlags([]string{"--config-file=/no/such/file"}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// etcd 3.7.3's flags with a fixed set of values refuse others, and
// --discovery-fallback=proxy is refused as in etcd.
func TestEtcdSelectiveFlags(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--initial-cluster-state=maybe", "invalid value"},
		{"--v2-deprecation=soon", `invalid value "soon"`},
		{"--discovery-fallback=later", "invalid value"},
		{"--discovery-fallback=proxy", `v2 proxy is deprecated, and --discovery-fallback can't be configured as "proxy"`},
	} {
		if _, err := parse(t, []string{tc.arg}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.arg, err, tc.want)
		}
	}
	cfg := mustParse(t, []string{"--initial-cluster-state=existing", "--v2-deprecation=write-only,gone",
		"--discovery-fallback=exit", "--vv", "--config", "--client-key-file=k.pem"}, nil)
	for _, want := range []string{"--vv is ignored", "--config is ignored", "--v2-deprecation is ignored", "--client-key-file is ignored"} {
		if !hasLine(cfg.warnings, want) {
			t.Errorf("no warning %q in %q", want, cfg.warnings)
		}
	}
	if _, err := parse(t, []string{"--version"}, nil); err != errVersion {
		t.Errorf("--version: %v", err)
	}
}

// TestCacheSize: --cache-size takes bytes, with or without a unit; its
// default is the server's.
func TestCacheSize(t *testing.T) {
	if cfg := mustParse(t, nil, nil); cfg.cacheBytes != 128<<20 {
		t.Errorf("default %d", cfg.cacheBytes)
	}
	for arg, want := range map[string]int64{"1048576": 1 << 20, "256MiB": 256 << 20, "1GiB": 1 << 30, "2GB": 2e9, "64 KiB": 64 << 10} {
		if cfg := mustParse(t, []string{"--cache-size=" + arg}, nil); cfg.cacheBytes != want {
			t.Errorf("--cache-size=%s: %d, want %d", arg, cfg.cacheBytes, want)
		}
	}
	if cfg := mustParse(t, nil, []string{"ETCD_CACHE_SIZE=32MiB"}); cfg.cacheBytes != 32<<20 {
		t.Errorf("ETCD_CACHE_SIZE=32MiB: %d", cfg.cacheBytes)
	}
	for _, bad := range []string{"lots", "-1", "12XB", "1.5GiB"} {
		if _, err := parse(t, []string{"--cache-size=" + bad}, nil); err == nil {
			t.Errorf("--cache-size=%s was taken", bad)
		}
	}
}
