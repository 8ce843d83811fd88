//go:build !linux

package dstest

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the emulator in its own process group, which Stop kills.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
