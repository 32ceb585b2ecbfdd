package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the server when the benchmark process
// dies without running its cleanups (a -timeout panic, a SIGKILL), so no
// validator or etcd outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
