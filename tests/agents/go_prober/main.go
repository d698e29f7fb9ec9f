// Command goprober tries, from inside its sandbox, what the sandbox must
// refuse, and runs into its resource limits; it answers as the Python prober
// and hog do (tests/agents/prober, tests/agents/hog), errors named by the
// Python exception the same failure raises there.
package main

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	agent "github.com/etherhost/ether/adapters/go"
)

type connectParams struct {
	Host string `json:"host" agent:"required"`
	Port int    `json:"port" agent:"required"`
}

type pathParams struct {
	Path string `json:"path" agent:"required"`
}

type urlParams struct {
	URL string `json:"url" agent:"required"`
}

type allocateParams struct {
	MiB int `json:"mib" agent:"required"`
}

type bombParams struct {
	Marker string `json:"marker" agent:"required"`
}

// errorName is the Python exception the same failure raises in the Python
// prober, so the three probers answer alike.
func errorName(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "ConnectionRefusedError"
	case errors.Is(err, fs.ErrNotExist):
		return "FileNotFoundError"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "PermissionError"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "TimeoutError"
	}
	return "OSError"
}

func outcome(err error, found map[string]any) map[string]any {
	out := map[string]any{"ok": err == nil, "error": ""}
	if err != nil {
		out["error"] = errorName(err)
	}
	for k, v := range found {
		out[k] = v
	}
	return out
}

func connect(_ context.Context, _ *agent.Task, p connectParams) (map[string]any, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.Host, strconv.Itoa(p.Port)), 5*time.Second)
	if err == nil {
		conn.Close()
	}
	return outcome(err, nil), nil
}

func read(_ context.Context, _ *agent.Task, p pathParams) (map[string]any, error) {
	if info, err := os.Stat(p.Path); err == nil && info.IsDir() {
		entries, err := os.ReadDir(p.Path)
		if err != nil {
			return outcome(err, nil), nil
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return outcome(nil, map[string]any{"entries": names}), nil
	}
	body, err := os.ReadFile(p.Path)
	if err != nil {
		return outcome(err, nil), nil
	}
	return outcome(nil, map[string]any{"size": len(body)}), nil
}

func write(_ context.Context, _ *agent.Task, p pathParams) (map[string]any, error) {
	return outcome(os.WriteFile(p.Path, []byte("written by the prober\n"), 0o644), nil), nil
}

func look(_ context.Context, _ *agent.Task) (any, error) {
	commands := map[string]string{}
	names, _ := os.ReadDir("/proc")
	for _, e := range names {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		commands[e.Name()] = strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
	}
	env := map[string]string{}
	for _, k := range []string{"HOME", "TMPDIR", "ETHER_SCRATCH"} {
		env[k] = os.Getenv(k)
	}
	env["HOSTNAME"], _ = os.Hostname()
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return map[string]any{"processes": commands, "env": env, "cwd": cwd}, nil
}

func get(ctx context.Context, t *agent.Task, p urlParams) (map[string]any, error) {
	r, err := agent.Fetch(ctx, t, agent.FetchRequest{URL: p.URL})
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": r.Status, "text": r.Text()}, nil
}

func allocate(_ context.Context, _ *agent.Task, p allocateParams) (map[string]any, error) {
	held := make([]byte, p.MiB<<20)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1 // every page written, so every page is charged
	}
	return map[string]any{"held_mib": len(held) >> 20}, nil
}

// bomb starts `sleep` children without end (each one's argv[0] is marker, so
// the test finds them), going on past every refused fork; it returns at once.
func bomb(_ context.Context, _ *agent.Task, p bombParams) (map[string]any, error) {
	go func() {
		for {
			child := exec.Command("sleep", "3600")
			child.Args[0] = p.Marker
			_ = child.Start()
		}
	}()
	return map[string]any{"started": true}, nil
}

func groups(_ context.Context, _ *agent.Task) (any, error) {
	file, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer file.Close()
	found := map[string]string{}
	lines := bufio.NewScanner(file)
	for lines.Scan() {
		parts := strings.SplitN(lines.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, name := range strings.Split(parts[1], ",") {
			found[name] = parts[2]
		}
	}
	return map[string]any{"memory": found["memory"], "pids": found["pids"]}, lines.Err()
}

func main() {
	a := agent.New("goprober", agent.WithVersion("1.0.0"), agent.WithCalls(agent.NetCalls...),
		agent.WithDescription("Probes its sandbox and runs into its limits."))
	a.Action("connect", agent.Typed(connect), agent.WithActionDescription("Open a TCP connection to host:port."))
	a.Action("read", agent.Typed(read), agent.WithActionDescription("Read a file, or list a directory."))
	a.Action("write", agent.Typed(write), agent.WithActionDescription("Create a file at path."))
	a.Action("look", look, agent.WithActionDescription("The processes this agent can see, and its environment."))
	a.Action("get", agent.Typed(get), agent.WithActionDescription("GET a URL through the host's net.fetch."))
	a.Action("allocate", agent.Typed(allocate), agent.WithActionDescription("Hold mib MiB of memory, every page written; return how much."))
	a.Action("bomb", agent.Typed(bomb), agent.WithActionDescription("Start sleep children without end, each named marker; return."))
	a.Action("groups", groups, agent.WithActionDescription("This process's memory and process-count control groups."))
	a.Serve()
}
