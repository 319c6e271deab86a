package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Memory is a process's resident memory from /proc/<pid>/status.
type Memory struct {
	// RSS is VmRSS, the resident set now; HWM is VmHWM, its peak so far.
	// Both in bytes.
	RSS, HWM int64
	// Anon and File split RSS into anonymous memory and file-backed
	// pages (RssAnon, RssFile; 0 where the kernel does not report them).
	Anon, File int64
}

// Memory reads the server's resident memory.
func (s *Server) Memory() (Memory, error) { return ReadMemory(s.Pid()) }

// ReadMemory reads VmRSS and VmHWM of process pid.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus reads the VmRSS, VmHWM, RssAnon and RssFile lines
// ("VmRSS:\t  1234 kB") of a /proc/<pid>/status file; the first two must
// be there.
func parseStatus(r io.Reader) (Memory, error) {
	var m Memory
	found := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		case "RssAnon":
			dst = &m.Anon
		case "RssFile":
			dst = &m.File
		}
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("proc: bad %s line %q", name, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("proc: bad %s line %q: %v", name, sc.Text(), err)
		}
		*dst = kb << 10
		if name == "VmRSS" || name == "VmHWM" {
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if found != 2 {
		return m, fmt.Errorf("proc: no VmRSS/VmHWM in status")
	}
	return m, nil
}

// FSType names the file system holding dir ("tmpfs", "ext4/xfs/other",
// ...): a tmpfs makes fsync free, which the report must say.
func FSType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux the harness runs on (it is fixed by the kernel ABI).
const clockTicks = 100

// CPUTime is the CPU time (user + system, all threads) the server has used.
func (s *Server) CPUTime() (time.Duration, error) { return ReadCPUTime(s.Pid()) }

// ReadCPUTime reads the user and system time of process pid.
func ReadCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime, fields 14 and 15 of /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may hold spaces, so the
// fields are counted after its closing parenthesis.
func parseStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc: bad stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc: short stat %q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc: bad stat %q: %v", stat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
