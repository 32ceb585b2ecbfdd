package bench

import (
	"io/fs"
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the server when the benchmark process
// dies without running its cleanups (a -timeout panic, a SIGKILL), so no
// validator or etcd outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// allocatedBytes is the space a file takes on disk (its blocks), which
// differs from its size for preallocated or sparse files.
func allocatedBytes(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512 // st_blocks counts 512-byte units whatever the block size
	}
	return info.Size()
}
