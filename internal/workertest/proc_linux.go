package workertest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the worker if the test process dies
// (for example when go test's timeout kills it), so no worker outlives it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
