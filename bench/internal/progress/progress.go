// Package progress shows what the harness is doing on standard error: on a
// terminal, one status line redrawn four times a second (step, counter,
// elapsed time); otherwise one line when each step starts and ends.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Counter reports how far a step has come: done out of total (total 0 if
// unknown). It is called only while the status line is drawn.
type Counter func() (done, total int64)

// Display is the progress display. Its methods may be called from any
// goroutine.
type Display struct {
	w     io.Writer
	tty   bool
	steps int

	mu      sync.Mutex
	index   int
	name    string
	began   time.Time
	count   Counter
	drawn   bool
	stop    chan struct{}
	stopped chan struct{}
}

// New returns a display on w for a run of the given number of steps. It
// redraws only if w is a terminal.
func New(w *os.File, steps int) *Display {
	d := &Display{w: w, steps: steps, stop: make(chan struct{}), stopped: make(chan struct{})}
	if st, err := w.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		d.tty = true
		go d.loop()
	} else {
		close(d.stopped)
	}
	return d
}

func (d *Display) loop() {
	defer close(d.stopped)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.mu.Lock()
			d.draw()
			d.mu.Unlock()
		}
	}
}

// Start begins the next step. count may be nil.
func (d *Display) Start(name string, count Counter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.index++
	d.name, d.began, d.count = name, time.Now(), count
	if d.tty {
		d.draw()
	} else {
		fmt.Fprintf(d.w, "%s %s ...\n", d.prefix(), name)
	}
}

// SetCounter replaces the current step's counter.
func (d *Display) SetCounter(count Counter) {
	d.mu.Lock()
	d.count = count
	d.mu.Unlock()
}

// End finishes the current step with a one-line result.
func (d *Display) End(result string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
	fmt.Fprintf(d.w, "%s %s: %s (%s)\n", d.prefix(), d.name, result, time.Since(d.began).Round(100*time.Millisecond))
	d.name, d.count = "", nil
}

// Logf prints a message above the status line.
func (d *Display) Logf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
	fmt.Fprintf(d.w, format+"\n", args...)
	if d.tty && d.name != "" {
		d.draw()
	}
}

// Close stops redrawing and clears the status line.
func (d *Display) Close() {
	if d.tty {
		close(d.stop)
	}
	<-d.stopped
	d.mu.Lock()
	d.clear()
	d.mu.Unlock()
}

func (d *Display) prefix() string {
	width := len(fmt.Sprint(d.steps))
	return fmt.Sprintf("[%*d/%d]", width, d.index, d.steps)
}

// draw writes the status line; d.mu is held.
func (d *Display) draw() {
	if !d.tty || d.name == "" {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\r\x1b[K%s %s", d.prefix(), d.name)
	if d.count != nil {
		done, total := d.count()
		if total > 0 {
			fmt.Fprintf(&b, "  %d/%d (%.0f%%)", done, total, 100*float64(done)/float64(total))
		} else if done > 0 {
			fmt.Fprintf(&b, "  %d", done)
		}
	}
	fmt.Fprintf(&b, "  %s", time.Since(d.began).Round(time.Second))
	io.WriteString(d.w, b.String())
	d.drawn = true
}

// clear erases the status line; d.mu is held.
func (d *Display) clear() {
	if d.tty && d.drawn {
		io.WriteString(d.w, "\r\x1b[K")
		d.drawn = false
	}
}
