//go:build unix

package browsertest

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts Chromium in a process group of its own, so that
// killProcessGroup also ends the renderer, GPU and zygote processes it forks.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killProcessGroup kills the group led by the Chromium we started (its
// pid), and nothing else.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
