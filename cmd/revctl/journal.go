package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/types"

	"revd/cmd/revctl/internal/journaltool"
	"revd/journal"
	"revd/server"
)

// The journal commands replay a data directory's journal offline (package
// revd/cmd/revctl/internal/journaltool), except checkpoint and hash, which ask a running
// server over NATS. Their exit statuses, unlike etcdctl's:
//
//	0  done (verify: no problem found)
//	1  the command ran and failed (verify: problems found; a damaged
//	   record; an export that does not import; a write that failed)
//	2  usage: bad arguments or flags, or an input that cannot be read at
//	   all (no such directory, not a revd data directory, a directory a
//	   running server holds, a file that cannot be opened); for checkpoint
//	   and hash, no connection to NATS
const (
	exitJournalFailed = 1
	exitJournalUsage  = 2
)

// journalSubcommands are the journal subcommands, in the order of the
// help text.
var journalSubcommands = []struct{ name, use, short string }{
	{"export", "export --data-dir DIR [--from R] [--to R] [--prefix P] [--format jsonl|proto] [--accept-loss] [--progress]",
		"Writes the snapshot at --from-1 and every event up to --to to stdout"},
	{"import", "import FILE --out DIR [--progress]",
		"Builds a new data directory from an export (FILE - reads stdin)"},
	{"verify", "verify --data-dir DIR [--progress]",
		"Reads every file (WALs, tables, MANIFEST, high-water mark), checks checksums, revision sequence, fold rules; prints the state hash"},
	{"restore", "restore FILE --out DIR [--name N --initial-cluster N=URL,... --initial-cluster-token T --initial-advertise-peer-urls URL]",
		"Builds a new data directory from a snapshot file (etcdctl snapshot save against revd): a one-member cluster, or member N of a new cluster"},
	{"rebuild", "rebuild --data-dir DIR --out DIR [--at-rev R] [--accept-loss] [--progress]",
		"Builds a new data directory as of revision R (default: the last)"},
	{"stats", "stats --data-dir DIR [-w json]",
		"Prints revisions, keys, events and sizes"},
	{"checkpoint", "checkpoint DIR",
		"Asks the running server, over NATS, to copy its data directory to DIR"},
	{"hash", "hash [--rev R]",
		"Asks the running server, over NATS, for its state hash at revision R"},
	{"tail", "tail [--from R] [--format jsonl|proto]",
		"Streams every event of the running server, over NATS, from revision R on (default: the next), until interrupted"},
}

// journalFlagOwners says which subcommands take each journal flag; every
// subcommand refuses the others' flags.
var journalFlagOwners = map[string][]string{
	"data-dir":                    {"export", "verify", "rebuild", "stats"},
	"from":                        {"export", "tail"},
	"to":                          {"export"},
	"prefix":                      {"export"},
	"format":                      {"export", "tail"},
	"progress":                    {"export", "import", "verify", "rebuild"},
	"out":                         {"import", "restore", "rebuild"},
	"name":                        {"restore"},
	"initial-cluster":             {"restore"},
	"initial-cluster-token":       {"restore"},
	"initial-advertise-peer-urls": {"restore"},
	"at-rev":                      {"rebuild"},
	"accept-loss":                 {"export", "rebuild"},
	"rev":                         {"hash"},
}

type journalOptions struct {
	dataDir, out, prefix, format string
	// restore into a member of a new cluster (etcdutl snapshot restore's)
	name, initialCluster, token, peerURLs string
	from, to, atRev, rev                  int64
	progress, acceptLoss                  bool
}

func journalCommand(r *runner, fs *flagSet) func([]string) error {
	var o journalOptions
	f := fs.fs
	f.StringVar(&o.dataDir, "data-dir", "", "export, verify, rebuild, stats: the data directory to read (a stopped server's, or a checkpoint)")
	f.Int64Var(&o.from, "from", 0, "export: first revision whose events are exported; the snapshot is the state before it (default: the base revision + 1); tail: first revision streamed (default: the next)")
	f.Int64Var(&o.to, "to", 0, "export: last revision exported (default: the last)")
	f.StringVar(&o.prefix, "prefix", "", "export: only keys with this prefix (such an export cannot be imported)")
	f.StringVar(&o.format, "format", "jsonl", "export: jsonl or proto (import tells them apart itself)")
	f.BoolVar(&o.progress, "progress", false, "show a progress bar on stderr even when it is not a terminal")
	f.StringVar(&o.out, "out", "", "import, rebuild: the data directory to create (must not exist, or be empty); restore: the data directory to create (must not exist)")
	f.StringVar(&o.name, "name", "default", "restore: the member's name in --initial-cluster")
	f.StringVar(&o.initialCluster, "initial-cluster", "", "restore: the new cluster the member will start, name=peer-url,... as revd's --initial-cluster "+
		"(default: a one-member cluster of the snapshot's member)")
	f.StringVar(&o.token, "initial-cluster-token", "etcd-cluster", "restore: the new cluster's token, as revd's --initial-cluster-token")
	f.StringVar(&o.peerURLs, "initial-advertise-peer-urls", "http://localhost:2380", "restore: the member's peer URLs, as revd's --initial-advertise-peer-urls")
	f.Int64Var(&o.atRev, "at-rev", 0, "rebuild: the revision to rebuild at (default: the last)")
	f.Int64Var(&o.rev, "rev", 0, "hash: the revision to hash (default: the newest)")
	f.BoolVar(&o.acceptLoss, "accept-loss", false, "export, rebuild: read a data directory that lost acknowledged writes "+
		"(revd refuses to start on it) as far as it can be read; what is missing is lost for good")
	return func(args []string) error {
		if len(args) == 0 {
			r.journalUsage()
			return nil
		}
		sub, err := findJournalSubcommand(args[0])
		if err != nil {
			return err
		}
		for name, owners := range journalFlagOwners {
			if fs.changed(name) && !slices.Contains(owners, sub) {
				return journalUsageErr("unknown flag for journal %s: --%s", sub, name)
			}
		}
		args = args[1:]
		switch sub {
		case "export":
			return r.journalExport(args, o)
		case "import":
			return r.journalImport(args, o)
		case "restore":
			return r.journalRestore(args, o)
		case "verify":
			return r.journalVerify(args, o)
		case "rebuild":
			return r.journalRebuild(args, o)
		case "stats":
			return r.journalStats(args, o)
		case "checkpoint":
			return r.journalCheckpoint(args)
		case "tail":
			return r.journalTail(args, o)
		default:
			return r.journalHash(args, o)
		}
	}
}

func journalUsageErr(format string, a ...any) error {
	return exitErrorf(exitJournalUsage, format, a...)
}

// flagError is the error for a command line whose flags do not parse:
// the journal commands exit with their usage status (2), the others as
// etcdctl does.
func flagError(cmd command, err error) error {
	if cmd.name == "journal" {
		return &exitErr{code: exitJournalUsage, err: err}
	}
	return err
}

func findJournalSubcommand(name string) (string, error) {
	for _, s := range journalSubcommands {
		if s.name == name {
			return name, nil
		}
	}
	return "", journalUsageErr("unknown command %q for \"revctl journal\"", name)
}

func (r *runner) journalUsage() {
	w := r.stdout
	fmt.Fprintln(w, "Replays a data directory's journal: export, import, verify, rebuild, stats; and checkpoint and hash a running server.")
	fmt.Fprintln(w, "\nUsage:")
	for _, s := range journalSubcommands {
		fmt.Fprintf(w, "  revctl journal %s\n      %s\n", s.use, s.short)
	}
	fmt.Fprintln(w, "\nThe offline subcommands read a stopped server's data directory, or a checkpoint of a running one;")
	fmt.Fprintln(w, "they never write to it. Exit status: 0 done, 1 failed (verify: problems found), 2 usage or unreadable input.")
	fmt.Fprintln(w, `Options: see "revctl journal --help".`)
}

// needArgs checks the number of positional arguments of a subcommand.
func needArgs(sub string, args []string, n int, what string) error {
	if len(args) != n {
		if n == 0 {
			return journalUsageErr("journal %s takes no arguments, got %q", sub, args)
		}
		return journalUsageErr("journal %s needs %s", sub, what)
	}
	return nil
}

// openJournal opens --data-dir read-only, with the errors a user can act on.
func openJournal(sub string, o journalOptions) (*journal.Journal, error) {
	if o.dataDir == "" {
		return nil, journalUsageErr("journal %s needs --data-dir", sub)
	}
	j, err := journal.OpenReadOnly(o.dataDir, journal.Options{CacheBytes: 16 << 20, Salvage: o.acceptLoss})
	if err != nil {
		return nil, openError(o.dataDir, err)
	}
	return j, nil
}

// openError explains why a data directory cannot be read; exit status 2.
func openError(dir string, err error) error {
	switch {
	case errors.Is(err, journal.ErrLocked):
		return journalUsageErr("%s is in use: a running revd holds its lock. Stop it, or copy it with "+
			"`revctl journal checkpoint DIR` and read the copy", dir)
	case errors.Is(err, journal.ErrNoJournal):
		return journalUsageErr("%s is not a revd data directory: %v", dir, err)
	case errors.Is(err, journal.ErrCorrupt):
		return journalUsageErr("%v; `revctl journal verify --data-dir %s` says what is wrong "+
			"(export and rebuild --accept-loss read what is left)", err, dir)
	}
	return &exitErr{code: exitJournalUsage, err: err}
}

// failed maps an error of a running subcommand: an out-of-range revision
// is a usage error, an existing --out too; anything else a failure.
func failed(err error) error {
	var e *exitErr
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, journaltool.ErrRange), errors.Is(err, fs.ErrExist):
		return &exitErr{code: exitJournalUsage, err: err}
	}
	return &exitErr{code: exitJournalFailed, err: err}
}

func (r *runner) journalExport(args []string, o journalOptions) error {
	if err := needArgs("export", args, 0, ""); err != nil {
		return err
	}
	format, err := journaltool.ParseFormat(o.format)
	if err != nil {
		return journalUsageErr("%v", err)
	}
	j, err := openJournal("export", o)
	if err != nil {
		return err
	}
	defer j.Close()
	bar := r.progressBar("export", o.progress)
	res, err := journaltool.Export(r.stdout, j, journaltool.ExportOptions{
		From: o.from, To: o.to, Prefix: []byte(o.prefix), Format: format, Progress: bar.update,
	})
	bar.finish(err == nil, fmt.Sprintf("%d records, %d events", res.Records, res.Events))
	if err != nil {
		return failed(err)
	}
	return nil
}

func (r *runner) journalImport(args []string, o journalOptions) error {
	if err := needArgs("import", args, 1, "one argument: the export file (- for stdin)"); err != nil {
		return err
	}
	if o.out == "" {
		return journalUsageErr("journal import needs --out")
	}
	in := r.stdin
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return journalUsageErr("%v", err)
		}
		defer f.Close()
		in = f
	}
	bar := r.progressBar("import", o.progress)
	res, err := journaltool.Import(in, o.out, journaltool.BuildOptions{Progress: bar.update})
	bar.finish(err == nil, fmt.Sprintf("%d records", res.Records))
	if err != nil {
		return failed(err)
	}
	r.printBuilt("imported", o.out, res)
	return nil
}

// journalRestore unpacks a snapshot file into a new data directory
// (journal.RestoreSnapshotAs): a one-member cluster of the snapshot's
// member, or, with --initial-cluster, a member of that new cluster, ids
// computed as revd computes them (etcdutl snapshot restore's flags).
func (r *runner) journalRestore(args []string, o journalOptions) error {
	if err := needArgs("restore", args, 1, "one argument: the snapshot file"); err != nil {
		return err
	}
	if o.out == "" {
		return journalUsageErr("journal restore needs --out")
	}
	if _, err := os.Stat(args[0]); err != nil {
		return journalUsageErr("%v", err)
	}
	var ro journal.RestoreOptions
	if o.initialCluster != "" {
		co, err := restoreCluster(o)
		if err != nil {
			return journalUsageErr("%v", err)
		}
		if ro.ClusterID, ro.MemberID, err = server.MemberIdentity(o.name, co); err != nil {
			return journalUsageErr("%v", err)
		}
	}
	m, err := journal.RestoreSnapshotAs(args[0], o.out, ro)
	if err != nil {
		return failed(err)
	}
	fmt.Fprintf(r.stdout, "restored %s at revision %d (compact revision %d, base revision %d)\n",
		o.out, m.LastRev, m.CompactRev, m.BaseRev)
	return nil
}

// restoreCluster reads restore's cluster flags (etcd's parsing of
// --initial-cluster, name=peer-url,...).
func restoreCluster(o journalOptions) (server.ClusterOptions, error) {
	urlsmap, err := types.NewURLsMap(o.initialCluster)
	if err != nil {
		return server.ClusterOptions{}, fmt.Errorf("--initial-cluster: %w", err)
	}
	co := server.ClusterOptions{InitialCluster: map[string][]string{}, Token: o.token}
	for name, urls := range urlsmap {
		co.InitialCluster[name] = urls.StringSlice()
	}
	for _, u := range strings.Split(o.peerURLs, ",") {
		co.PeerURLs = append(co.PeerURLs, strings.TrimSpace(u))
	}
	return co, nil
}

func (r *runner) journalRebuild(args []string, o journalOptions) error {
	if err := needArgs("rebuild", args, 0, ""); err != nil {
		return err
	}
	if o.out == "" {
		return journalUsageErr("journal rebuild needs --out")
	}
	j, err := openJournal("rebuild", o)
	if err != nil {
		return err
	}
	defer j.Close()
	bar := r.progressBar("rebuild", o.progress)
	res, err := journaltool.Rebuild(j, o.out, journaltool.RebuildOptions{AtRev: o.atRev,
		BuildOptions: journaltool.BuildOptions{Progress: bar.update}})
	bar.finish(err == nil, fmt.Sprintf("%d records", res.Records))
	if err != nil {
		return failed(err)
	}
	r.printBuilt("rebuilt", o.out, res)
	return nil
}

func (r *runner) printBuilt(verb, dir string, res journaltool.BuildResult) {
	m := res.Meta
	fmt.Fprintf(r.stdout, "%s %s at revision %d (compact revision %d, base revision %d): %d snapshot keys, %d records, %d events\n",
		verb, dir, m.LastRev, m.CompactRev, m.BaseRev, res.SnapshotKeys, res.Records, res.Events)
	fmt.Fprintf(r.stdout, "state hash at revision %d: %s (%d keys)\n", m.LastRev, res.Hash, res.Keys)
}

func (r *runner) journalVerify(args []string, o journalOptions) error {
	if err := needArgs("verify", args, 0, ""); err != nil {
		return err
	}
	if o.dataDir == "" {
		return journalUsageErr("journal verify needs --data-dir")
	}
	bar := r.progressBar("verify", o.progress)
	res, err := journaltool.Verify(o.dataDir, journaltool.VerifyOptions{
		OnProblem: func(p journaltool.Problem) {
			bar.clear()
			fmt.Fprintln(r.stdout, p.String())
		},
		Progress: bar.update,
	})
	bar.finish(err == nil, fmt.Sprintf("%d records", res.Records))
	if err != nil {
		return openError(o.dataDir, err)
	}
	w := r.stdout
	m := res.Meta
	records := "no records"
	if res.Records > 0 {
		records = fmt.Sprintf("%d records (revisions %d to %d)", res.Records, res.FirstRecord, res.LastRecord)
	}
	if res.Problems == 0 {
		fmt.Fprintf(w, "ok: %s, %d base entries (base revision %d), compact revision %d\n",
			records, res.BaseKeys, m.BaseRev, m.CompactRev)
	}
	if res.Hashed {
		fmt.Fprintf(w, "state hash at revision %d: %s (%d keys)\n", m.LastRev, res.Hash, res.Keys)
	}
	if res.Problems == 0 {
		return nil
	}
	s := "s"
	if res.Problems == 1 {
		s = ""
	}
	msg := fmt.Sprintf("%d problem%s found in %s (%s)", res.Problems, s, o.dataDir, records)
	switch {
	case res.Unopened:
		msg = fmt.Sprintf("%d problem%s found in %s; the store does not open, so its records were not read",
			res.Problems, s, o.dataDir)
	case !res.Hashed:
		msg += fmt.Sprintf("; the state could be rebuilt up to revision %d only, so it was not hashed", res.StateRev)
	}
	fmt.Fprintln(w, msg)
	return &exitErr{code: exitJournalFailed, err: errSilent}
}

func (r *runner) journalStats(args []string, o journalOptions) error {
	if err := needArgs("stats", args, 0, ""); err != nil {
		return err
	}
	if r.g.writeOut != "simple" && r.g.writeOut != "json" {
		return journalUsageErr("journal stats writes simple or json, not %s", r.g.writeOut)
	}
	j, err := openJournal("stats", o)
	if err != nil {
		return err
	}
	defer j.Close()
	st, err := journaltool.ComputeStats(j, o.dataDir)
	if err != nil {
		return failed(err)
	}
	if r.g.writeOut == "json" {
		b, _ := json.Marshal(st)
		fmt.Fprintln(r.stdout, string(b))
		return nil
	}
	none := func(rev int64) string {
		if rev == 0 {
			return "none"
		}
		return fmt.Sprint(rev)
	}
	lines := [][2]string{
		{"first revision", none(st.FirstRecord)},
		{"last revision", none(st.LastRecord)},
		{"revision", fmt.Sprint(st.Revision)},
		{"compact revision", fmt.Sprint(st.CompactRev)},
		{"base revision", fmt.Sprint(st.BaseRev)},
		{"keys", fmt.Sprintf("%d (alive at revision %d)", st.Keys, st.Revision)},
		{"records", fmt.Sprint(st.Records)},
		{"events", fmt.Sprint(st.Events)},
		{"record bytes", fmt.Sprintf("%d (%s)", st.RecordBytes, humanBytes(uint64(st.RecordBytes)))},
		{"base keys", fmt.Sprint(st.BaseKeys)},
		{"base bytes", fmt.Sprintf("%d (%s)", st.BaseBytes, humanBytes(uint64(st.BaseBytes)))},
		{"on-disk size", fmt.Sprintf("%d (%s)", st.DiskBytes, humanBytes(uint64(st.DiskBytes)))},
		{"cluster id", fmt.Sprintf("%x", st.ClusterID)},
		{"member id", fmt.Sprintf("%x", st.MemberID)},
		{"term", fmt.Sprint(st.Term)},
	}
	for _, l := range lines {
		fmt.Fprintf(r.stdout, "%-17s %s\n", l[0]+":", l[1])
	}
	return nil
}

// absDir makes a checkpoint directory absolute against revctl's working
// directory: the server, which writes it, runs elsewhere.
func absDir(dir string) (string, error) {
	if strings.TrimSpace(dir) == "" {
		return "", journalUsageErr("journal checkpoint needs a directory")
	}
	return filepath.Abs(dir)
}
