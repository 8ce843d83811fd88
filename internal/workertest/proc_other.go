//go:build !linux

package workertest

import "os/exec"

func setDeathSignal(*exec.Cmd) {}
