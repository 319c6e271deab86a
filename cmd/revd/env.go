package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"go.etcd.io/etcd/pkg/v3/flags"
)

// envPrefix starts the environment variables that set flags, as in etcd:
// --max-request-bytes is ETCD_MAX_REQUEST_BYTES. revd's own flags take the
// same prefix (ETCD_NATS_URL), so one environment configures either server.
const envPrefix = "ETCD"

// flagsFromEnv sets each flag the command line left unset from its
// environment variable, as etcd's flags.SetFlagsFromEnv does: an empty
// variable sets nothing; a value the flag refuses is an error naming the
// variable; a variable for a flag also given on the command line is an
// error (etcd stops on it too); a variable with the prefix that names no
// flag is a warning, and so is ETCD_VERSION, which etcd refuses to read.
// notes name the variables used.
func flagsFromEnv(fs *flag.FlagSet, environ []string) (notes, warnings []string, err error) {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[flags.FlagToEnv(envPrefix, f.Name)] = true })
	known := map[string]string{} // variable → flag
	fs.VisitAll(func(f *flag.Flag) { known[flags.FlagToEnv(envPrefix, f.Name)] = f.Name })
	versionKey := flags.FlagToEnv(envPrefix, "version")
	for _, kv := range environ {
		key, value, _ := strings.Cut(kv, "=")
		name, isFlag := known[key]
		switch {
		case !strings.HasPrefix(key, envPrefix+"_"):
		case key == versionKey:
			warnings = append(warnings, fmt.Sprintf("cannot set special environment variable %s=%s (ignored, as etcd does)", key, value))
		case onCommandLine[key]:
			return nil, nil, fmt.Errorf("conflicting environment variable %s is shadowed by corresponding command-line flag --%s (either unset environment variable or disable flag)", key, name)
		case !isFlag:
			warnings = append(warnings, fmt.Sprintf("unrecognized environment variable %s=%s", key, value))
		case value == "":
		default:
			if err := fs.Set(name, value); err != nil {
				return nil, nil, fmt.Errorf("invalid value %q for %s: %w", value, key, err)
			}
			shown := value
			if strings.Contains(name, "password") {
				shown = "(hidden)" // etcd logs it; a log is no place for one
			}
			notes = append(notes, fmt.Sprintf("recognized and used environment variable %s=%s", key, shown))
		}
	}
	sort.Strings(notes)
	sort.Strings(warnings)
	return notes, warnings, nil
}

// envValue is the value of key in environ ("" when absent); the first
// assignment wins, as for os.Getenv.
func envValue(environ []string, key string) string {
	for _, kv := range environ {
		if k, val, _ := strings.Cut(kv, "="); k == key {
			return val
		}
	}
	return ""
}
