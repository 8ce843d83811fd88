package dstest

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the emulator in its own process group (Stop kills the
// group) and has the kernel kill it when the test process dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
