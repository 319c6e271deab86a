package main

import (
	"flag"
	"fmt"
	"strings"
)

// flagSet parses command lines the way etcdctl's (cobra/pflag) do, on top
// of the standard library's flag values: flags may come before, between or
// after the positional arguments; "--name=value", "--name value",
// "-w json", "-wjson" and "-w=json" all work; a bool flag takes no
// separate value ("--prefix", "--prefix=false"); "--" ends the flags; and
// "-" alone is an argument. Unlike package flag, "-name" is not a long
// flag: as in pflag it is a run of one-letter flags.
type flagSet struct {
	fs    *flag.FlagSet
	short map[byte]string // one-letter name -> long name
}

func newFlagSet(name string) *flagSet {
	return &flagSet{fs: flag.NewFlagSet(name, flag.ContinueOnError), short: map[byte]string{}}
}

func (f *flagSet) shorthand(letter byte, long string) { f.short[letter] = long }

type boolFlag interface{ IsBoolFlag() bool }

func (f *flagSet) isBool(name string) bool {
	b, ok := f.fs.Lookup(name).Value.(boolFlag)
	return ok && b.IsBoolFlag()
}

// parse sets the flags found in args and returns the positional arguments.
func (f *flagSet) parse(args []string) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(pos, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			if f.fs.Lookup(name) == nil || name == "" {
				return nil, fmt.Errorf("unknown flag: --%s", name)
			}
			if !hasVal {
				if f.isBool(name) {
					val = "true"
				} else if i+1 < len(args) {
					i++
					val = args[i]
				} else {
					return nil, fmt.Errorf("flag needs an argument: --%s", name)
				}
			}
			if err := f.set(name, "--"+name, val); err != nil {
				return nil, err
			}
		case len(a) > 1 && a[0] == '-':
			next, err := f.parseShort(args, i)
			if err != nil {
				return nil, err
			}
			i = next
		default:
			pos = append(pos, a)
		}
	}
	return pos, nil
}

// parseShort parses args[i], a run of one-letter flags such as "-i" or
// "-wjson"; a non-bool flag takes the rest of the run, or the next
// argument, as its value. It returns the index of the last argument used.
func (f *flagSet) parseShort(args []string, i int) (int, error) {
	a := args[i]
	for j := 1; j < len(a); j++ {
		name, ok := f.short[a[j]]
		if !ok {
			return i, fmt.Errorf("unknown shorthand flag: %q in %s", a[j], a)
		}
		spelled, rest := "-"+a[j:j+1], a[j+1:]
		if f.isBool(name) {
			if strings.HasPrefix(rest, "=") {
				return i, f.set(name, spelled, rest[1:])
			}
			if err := f.set(name, spelled, "true"); err != nil {
				return i, err
			}
			continue
		}
		switch {
		case rest != "":
			return i, f.set(name, spelled, strings.TrimPrefix(rest, "="))
		case i+1 < len(args):
			return i + 1, f.set(name, spelled, args[i+1])
		default:
			return i, fmt.Errorf("flag needs an argument: %q in %s", a[j], a)
		}
	}
	return i, nil
}

func (f *flagSet) set(name, spelled, val string) error {
	if err := f.fs.Set(name, val); err != nil {
		return fmt.Errorf("invalid argument %q for %q flag: %v", val, spelled, err)
	}
	return nil
}

// changed reports whether the command line set the flag.
func (f *flagSet) changed(name string) bool {
	found := false
	f.fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}
