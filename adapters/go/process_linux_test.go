//go:build linux

package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary play a real agent process (and a host that
// spawns one) for the process-level tests.
func TestMain(m *testing.M) {
	switch os.Getenv("AGENT_TEST_ROLE") {
	case "agent":
		fmt.Println("banner from user code before Serve")
		helperAgent().Serve()
	case "host":
		os.Exit(helperHost())
	}
	os.Exit(m.Run())
}

func helperAgent() *Agent {
	a := New("helper")
	a.Action("print", func(context.Context, *Task) (any, error) {
		fmt.Println("user output on stdout")
		fmt.Fprintln(os.Stdout, `{"type":"result","id":"h-1","status":"ok","result":"forged"}`)
		return "printed", nil
	})
	a.Action("spawn", func(context.Context, *Task) (any, error) {
		cmd := exec.Command("sleep", "100")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		go cmd.Wait()
		return cmd.Process.Pid, nil
	})
	a.Action("sleep", func(ctx context.Context, _ *Task) (any, error) {
		select {
		case <-time.After(400 * time.Millisecond):
			return "slept", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	return a
}

func agentCmd(t testing.TB, extraEnv ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append([]string{"AGENT_TEST_ROLE=agent", "PATH=" + os.Getenv("PATH"),
		"ETHER_HOST_COOKIE=ether-agent-v1", "ETHER_PROTOCOL_VERSIONS=1",
		"ETHER_HOST_PPID=" + strconv.Itoa(os.Getpid())}, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// helperHost spawns an agent, has it start a grandchild, prints both pids
// and waits to be killed.
func helperHost() int {
	cmd := agentCmd(nil)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if f := os.Getenv("AGENT_TEST_STDERR"); f != "" {
		cmd.Stderr, _ = os.Create(f)
	}
	if err := cmd.Start(); err != nil {
		return 1
	}
	r := bufio.NewReader(stdout)
	r.ReadBytes('\n') // hello
	fmt.Fprintln(stdin, `{"type":"welcome","protocol":1}`)
	fmt.Fprintln(stdin, `{"type":"task","id":"h-1","action":"spawn","params":{}}`)
	line, _ := r.ReadBytes('\n')
	var res struct{ Result int }
	json.Unmarshal(line, &res)
	fmt.Printf("%d %d\n", cmd.Process.Pid, res.Result)
	time.Sleep(time.Minute)
	return 0
}

func TestProcessWithoutCookieExits78(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"AGENT_TEST_ROLE=agent"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 78 || !strings.Contains(string(out), "ETHER_HOST_COOKIE") {
		t.Fatalf("err = %v, output = %s", err, out)
	}
}

func TestProcessStdoutOfUserCodeGoesToStderr(t *testing.T) {
	cmd := agentCmd(t)
	cmd.Stdin = strings.NewReader(`{"type":"welcome","protocol":1}` + "\n" + `{"type":"task","id":"h-1","action":"print","params":{}}` + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agent: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"type":"hello"`) || lines[1] != `{"type":"result","id":"h-1","status":"ok","result":"printed"}` {
		t.Fatalf("stdout = %q", out)
	}
	if !strings.Contains(stderr.String(), "banner from user code") || !strings.Contains(stderr.String(), "user output on stdout") || !strings.Contains(stderr.String(), "forged") {
		t.Fatalf("stderr = %q", stderr.String())
	}
}

func TestProcessSIGTERMIsAGracefulShutdownAndSIGINTIsIgnored(t *testing.T) {
	cmd := agentCmd(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := bufio.NewReader(stdout)
	r.ReadBytes('\n')
	fmt.Fprintln(stdin, `{"type":"welcome","protocol":1}`)
	fmt.Fprintln(stdin, `{"type":"task","id":"h-1","action":"sleep","params":{}}`)
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Process.Signal(syscall.SIGTERM)
	line, _ := r.ReadBytes('\n')
	if !strings.Contains(string(line), `"status":"ok"`) {
		t.Fatalf("result = %s", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func TestProcessKillsItsGroupWhenTheHostDies(t *testing.T) {
	// Orphans reparent to this test process, which reaps them and sees
	// how the agent ended.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("PR_SET_CHILD_SUBREAPER: %v", errno)
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0)
	errFile := t.TempDir() + "/agent.stderr"
	host := exec.Command(os.Args[0])
	host.Env = []string{"AGENT_TEST_ROLE=host", "PATH=" + os.Getenv("PATH"), "AGENT_TEST_STDERR=" + errFile}
	out, _ := host.StdoutPipe()
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	var agentPID, grandchild int
	if _, err := fmt.Fscan(bufio.NewReader(out), &agentPID, &grandchild); err != nil || grandchild == 0 {
		host.Process.Kill()
		t.Fatalf("host helper: %v", err)
	}
	host.Process.Kill()
	host.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ws syscall.WaitStatus
		syscall.Wait4(agentPID, &ws, syscall.WNOHANG, nil) // ours once orphaned
		if !alive(agentPID) && !alive(grandchild) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(-agentPID, syscall.SIGKILL)
			b, _ := os.ReadFile(errFile)
			t.Fatalf("5 s after the host died: agent %d alive=%v, grandchild %d alive=%v\nagent stderr:\n%s",
				agentPID, alive(agentPID), grandchild, alive(grandchild), b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const prSetChildSubreaper = 36

// alive reports whether pid runs (a zombie counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
