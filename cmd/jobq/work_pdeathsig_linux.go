package main

import "syscall"

// dieWithParent has the kernel send the command SIGKILL when the thread
// that started it, and so this jobq work process, dies (Pdeathsig): a
// `jobq work` killed with SIGKILL gets no chance to stop its commands, and
// a command left running would run beside the job's re-run. Only the
// command itself gets the signal; its own children should exit when their
// parent does (cancel and lease loss still signal the whole process group).
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
