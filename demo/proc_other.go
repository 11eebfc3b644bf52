//go:build !linux

package demo

import "syscall"

// childAttr: elsewhere the demo stops its daemons itself on the way out.
func childAttr() *syscall.SysProcAttr { return nil }
