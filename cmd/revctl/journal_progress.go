package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progressBar draws a bar on stderr as the journal commands go:
//
//	export [=============>               ]  45.0%  450000/1000000 records
//
// It redraws only when the shown tenth of a percent changes (at most 1001
// times, however long the journal), so it needs no clock. It is on when
// stderr is a terminal, or with --progress.
type progressBar struct {
	w     io.Writer
	label string
	on    bool
	shown int64 // tenths of a percent drawn last; -1: nothing yet
	drawn bool  // a line is on screen without its newline
}

const progressWidth = 30

func (r *runner) progressBar(label string, force bool) *progressBar {
	return &progressBar{w: r.stderr, label: label, on: force || isTerminal(r.stderr), shown: -1}
}

// isTerminal says whether w is a character device, as a terminal is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update is a journaltool.Progress.
func (p *progressBar) update(done, total int64) {
	if p == nil || !p.on || total <= 0 {
		return
	}
	done = min(done, total)
	permille := done * 1000 / total
	if permille == p.shown {
		return
	}
	p.shown = permille
	fill := int(permille * progressWidth / 1000)
	bar := strings.Repeat("=", fill)
	if fill < progressWidth {
		bar += ">" + strings.Repeat(" ", progressWidth-fill-1)
	}
	fmt.Fprintf(p.w, "\r%s [%s] %5.1f%%  %d/%d records", p.label, bar, float64(permille)/10, done, total)
	p.drawn = true
}

// clear ends the bar's line, so that other output starts on a line of its
// own; the next update draws the bar again below it.
func (p *progressBar) clear() {
	if p != nil && p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
		p.shown = -1
	}
}

// finish ends the bar with a summary when it was drawn.
func (p *progressBar) finish(ok bool, summary string) {
	if p == nil || !p.on || p.shown < 0 && !p.drawn {
		return
	}
	status := "done"
	if !ok {
		status = "failed"
	}
	fmt.Fprintf(p.w, "\r%s %s: %s%s\n", p.label, status, summary, strings.Repeat(" ", 20))
	p.drawn = false
}
