package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one server process (a validator or an etcd member) started by the
// benchmark and killed when it ends.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// startProc starts bin with args and env (added to the environment), its
// output going to logPath, and registers its kill with cleanup.
func startProc(cleanup func(func()), name, bin string, args, env []string, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, logPath: logPath, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	cleanup(p.kill)
	return p, nil
}

// kill sends SIGKILL to this process (only the one the benchmark started)
// and waits for it to be gone.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// alive reports an error when the process has exited, with its log's tail.
func (p *proc) alive() error {
	select {
	case <-p.exited:
		b, _ := os.ReadFile(p.logPath)
		if len(b) > 2048 {
			b = b[len(b)-2048:]
		}
		return fmt.Errorf("%s exited: %s\n%s", p.name, p.cmd.ProcessState, bytes.TrimSpace(b))
	default:
		return nil
	}
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux configuration Go supports.
const clockTick = 10 * time.Millisecond

// cpu returns the CPU time (user + system) the process has used so far, 0
// when it cannot be read (not Linux, or the process is gone).
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "stat"))
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces; fields resume after ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseUint(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * clockTick
}

// selfCPU returns the CPU time this (client) process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU returns the busy and total jiffies of all CPUs (/proc/stat).
func machineCPU() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}
