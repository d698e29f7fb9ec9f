//go:build linux

package agent

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// init runs before any package that imports this one, so before user
// code: under the host it arms the parent-death signal on the main thread
// and moves the frame stream off fd 1.
func init() {
	if os.Getenv(cookieEnv) != cookieValue {
		return
	}
	// PR_SET_PDEATHSIG belongs to the calling thread; the main goroutine
	// stays on the main thread, which lives as long as the process.
	runtime.LockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	takeOverStdio()
}

// redirectStdio moves frames to private close-on-exec duplicates of fds 0
// and 1, points fd 1 (and os.Stdout) at stderr and fd 0 at /dev/null, so
// user code and its children cannot touch the link.
func redirectStdio() (in, out *os.File) {
	outFD, err := dupCloexec(1)
	if err != nil {
		return os.Stdin, os.Stdout
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		_ = syscall.Close(outFD)
		return os.Stdin, os.Stdout
	}
	out = os.NewFile(uintptr(outFD), "ether-frames-out")
	os.Stdout = os.Stderr

	in = os.Stdin
	inFD, err := dupCloexec(0)
	if err != nil {
		return in, out
	}
	null, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err == nil && syscall.Dup3(null, 0, 0) == nil {
		in = os.NewFile(uintptr(inFD), "ether-frames-in")
	} else {
		_ = syscall.Close(inFD)
	}
	if err == nil {
		_ = syscall.Close(null)
	}
	return in, out
}

func dupCloexec(fd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 3)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// killProcessGroup ends every process of the agent's group (its
// grandchildren included), the agent itself last, when the agent leads the
// group.
func killProcessGroup() {
	if syscall.Getpgrp() != os.Getpid() {
		return
	}
	killGroupMembers()
	_ = syscall.Kill(0, syscall.SIGKILL)
}

// killGroupMembers ends the other processes of the agent's group: SIGTERM,
// then SIGKILL to those still there 200 ms later. It does nothing when the
// agent does not lead its group (the group is then not the agent's).
func killGroupMembers() {
	pgrp, self := syscall.Getpgrp(), os.Getpid()
	if pgrp != self {
		return
	}
	members := func() []int {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			// pid (comm) state ppid pgrp ...; comm may hold spaces.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 {
				continue
			}
			f := strings.Fields(string(b[i+1:]))
			if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgrp) {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	pids := members()
	if len(pids) == 0 {
		return
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); {
		if len(members()) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range members() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
