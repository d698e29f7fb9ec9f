package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const exitFatal = 78 // EX_CONFIG: "never restart me"

const cookieHint = `%s is an Ether agent: it speaks the Ether stdio protocol and is meant to be
started by the Ether host, which sets ETHER_HOST_COOKIE. Register its folder with the host
instead of running it by hand (see docs/protocol.md).
`

// Serve serves a over the process's stdin and stdout until the host shuts
// it down, then exits the process. It is the same as a.Serve().
func Serve(a *Agent) { a.Serve() }

// Serve serves the agent over the process's stdin and stdout and exits
// the process: 0 after a shutdown or stdin EOF, 78 ("never restart me")
// when started outside the host, when no protocol version fits, when the
// host refuses the agent or when setup fails. Ctrl-C (SIGINT) is ignored,
// since the host owns the terminal; SIGTERM is a shutdown. When the host
// dies, the agent kills its own process group and exits.
func (a *Agent) Serve() {
	os.Exit(a.serveProcess())
}

func (a *Agent) serveProcess() int {
	if os.Getenv(cookieEnv) != cookieValue {
		fmt.Fprintf(os.Stderr, cookieHint, a.name)
		return exitFatal
	}
	in, out := takeOverStdio()
	// Catch SIGINT and drop it (the host owns Ctrl-C). Caught, not
	// ignored, so the children of user code get the default disposition.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM)

	s := newSession(context.Background(), a, out, os.Stderr, os.Getenv)
	watch := newHostWatch(os.Getenv("ETHER_HOST_PPID"))
	var once sync.Once
	hostGone := func() {
		once.Do(func() {
			s.warn("the host (pid %d) is gone; killing this agent's process group", watch.hostPID)
			killProcessGroup()
			os.Exit(1)
		})
	}
	if watch.gone() {
		hostGone()
	}
	go func() {
		for range time.Tick(time.Second) {
			if watch.gone() {
				hostGone()
			}
		}
	}()
	go func() {
		for range sigs {
			if watch.gone() {
				hostGone()
			}
			s.sigterm()
		}
	}()
	err := s.run(in)
	if watch.gone() {
		hostGone()
	}
	if !s.orderlyStop() {
		// The link ended without a shutdown frame: the host may be dying
		// (its pid changes only after our stdin closes, and the
		// parent-death signal may come first). Leave no grandchild.
		killGroupMembers()
	}
	return exitCode(err)
}

func exitCode(err error) int {
	var e *Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return exitFatal
	}
	fmt.Fprintf(os.Stderr, "[ERROR] ether-agent: %v\n", err)
	return 1
}

// hostWatch tells whether the host process died. The host's pid comes
// from ETHER_HOST_PPID; when the agent was started through a wrapper (its
// parent is not the host), the host's pid is probed instead.
type hostWatch struct {
	hostPID     int
	initialPPID int
}

func newHostWatch(env string) *hostWatch {
	pid, _ := strconv.Atoi(env)
	return &hostWatch{hostPID: pid, initialPPID: os.Getppid()}
}

func (w *hostWatch) gone() bool {
	ppid := os.Getppid()
	if w.hostPID > 0 && w.initialPPID == w.hostPID {
		return ppid != w.hostPID
	}
	if ppid != w.initialPPID {
		return true
	}
	return w.hostPID > 0 && !processAlive(w.hostPID)
}
