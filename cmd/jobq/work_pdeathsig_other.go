//go:build !linux

package main

import "syscall"

// dieWithParent is a no-op where the kernel has no parent-death signal.
func dieWithParent(*syscall.SysProcAttr) {}
