package demo

import "syscall"

// childAttr makes a daemon die with the demo, even if the demo is killed.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
