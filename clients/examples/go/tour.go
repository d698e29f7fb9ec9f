// Command tour walks through AgentIOService from Go: the directory, a call, a streamed call, a
// pipe and an error. Run it from this folder against a host serving the example agents:
//
//	go run . --address 127.0.0.1:50051 --path ../../..
//
// The Python and TypeScript tours beside it do the same steps and print the same lines.
// ETHER_TOKEN, when set, is sent as a bearer token (for a host started with --auth-tokens-file).
// ETHER_TLS_CA, ETHER_TLS_CLIENT_CERT and ETHER_TLS_CLIENT_KEY, when set, connect with TLS and a
// client certificate (docs/auth.md).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	etherv1 "github.com/etherhost/ether/clients/go/ether/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// deadline bounds every call; the host passes what is left of it on to the agent.
const deadline = 30 * time.Second

func main() {
	address := flag.String("address", "127.0.0.1:50051", "host:port of the Ether host")
	path := flag.String("path", ".", "the folder whose files scout reads")
	flag.Parse()
	root, err := filepath.Abs(*path)
	check("path", err)

	creds, err := transportCredentials()
	check("tls", err)
	conn, err := grpc.NewClient(*address, grpc.WithTransportCredentials(creds))
	check("connect", err)
	defer conn.Close()
	agents := etherv1.NewAgentIOServiceClient(conn)

	// 1. The directory, page by page: a host may hold more agents than one page.
	var names []string
	request := &etherv1.ListAgentsRequest{}
	for {
		ctx, cancel := callContext()
		page, err := agents.ListAgents(ctx, request)
		cancel()
		check("list agents", err)
		for _, agent := range page.GetAgents() {
			names = append(names, agent.GetName())
		}
		if page.GetNextPageToken() == "" {
			break
		}
		request.PageToken = page.GetNextPageToken()
	}
	fmt.Println("agents: " + strings.Join(names, ", "))

	// 2. One call. A task that fails inside the agent is an AgentOutput with status ERROR,
	// not an RPC error: the RPC fails only when the host could not run the task at all.
	ctx, cancel := callContext()
	defer cancel()
	reply, err := agents.Execute(ctx, &etherv1.ExecuteRequest{
		Input: task("analyze_file", map[string]any{"path": filepath.Join(root, "README.md")}),
	})
	check("analyze_file", err)
	output := succeeded("analyze_file", reply.GetOutput())
	fmt.Printf("analyze_file: %s lines=%d pid=%d\n",
		statusName(output), field(output, "lines"), output.GetMetadata().GetPid())

	// 3. A streamed call: started, progress and log events as they happen, then the output.
	ctx, cancel = callContext()
	defer cancel()
	stream, err := agents.ExecuteStream(ctx, &etherv1.ExecuteStreamRequest{
		Input: task("search_content", map[string]any{
			"path": filepath.Join(root, "server"), "pattern": "class .*Servicer", "glob": "*.py",
		}),
	})
	check("search_content", err)
	for {
		event, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break // the stream ended OK, after the output event
		}
		check("search_content", err)
		var line string
		switch e := event.GetEvent().(type) {
		case *etherv1.ExecuteStreamResponse_Started:
			line = fmt.Sprintf("started pid=%d", e.Started.GetPid())
		case *etherv1.ExecuteStreamResponse_Progress:
			line = fmt.Sprintf("progress %.0f/%.0f", e.Progress.GetProgress(), e.Progress.GetTotal())
		case *etherv1.ExecuteStreamResponse_Log:
			line = fmt.Sprintf("log %s %s", e.Log.GetLevel(), e.Log.GetMessage())
		case *etherv1.ExecuteStreamResponse_Output:
			output := succeeded("search_content", e.Output)
			line = fmt.Sprintf("output %s count=%d", statusName(output), field(output, "count"))
		}
		fmt.Printf("stream %d: %s\n", event.GetSequence(), line)
	}

	// 4. A pipe: many tasks over one stream, outputs in the order they finish. Sending all three
	// before reading is fine for a few inputs; a large batch would send from its own goroutine.
	ctx, cancel = callContext()
	defer cancel()
	pipe, err := agents.Pipe(ctx)
	check("pipe", err)
	files := []string{"README.md", "Makefile", "pyproject.toml"}
	for _, name := range files {
		input := task("analyze_file", map[string]any{"path": filepath.Join(root, name)})
		check("pipe send", pipe.Send(&etherv1.PipeRequest{Input: input}))
	}
	check("pipe close", pipe.CloseSend()) // half-close: in-flight tasks finish, then the stream ends
	var outputs []*etherv1.AgentOutput
	for {
		response, err := pipe.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		check("pipe", err)
		outputs = append(outputs, succeeded("pipe", response.GetOutput()))
	}
	if len(outputs) != len(files) {
		fail("pipe", fmt.Errorf("%d outputs for %d inputs", len(outputs), len(files)))
	}
	sort.Slice(outputs, func(i, j int) bool { return baseName(outputs[i]) < baseName(outputs[j]) })
	for _, output := range outputs {
		fmt.Printf("pipe: %s %s lines=%d\n", baseName(output), statusName(output), field(output, "lines"))
	}

	// 4b. A batch: the same tasks in one request (Inputs), answered in responses that each carry
	// every output finished since the previous one (Outputs), still in the order they finish.
	// Each task runs and fails on its own; MaxInFlight counts tasks, not messages.
	ctx, cancel = callContext()
	defer cancel()
	batch, err := agents.Pipe(ctx)
	check("batch", err)
	inputs := make([]*etherv1.AgentInput, 0, len(files))
	for _, name := range files {
		inputs = append(inputs, task("analyze_file", map[string]any{"path": filepath.Join(root, name)}))
	}
	check("batch send", batch.Send(&etherv1.PipeRequest{Inputs: inputs}))
	check("batch close", batch.CloseSend())
	var batched []*etherv1.AgentOutput
	for {
		response, err := batch.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		check("batch", err)
		for _, output := range response.GetOutputs() {
			batched = append(batched, succeeded("batch", output))
		}
	}
	if len(batched) != len(files) {
		fail("batch", fmt.Errorf("%d outputs for %d inputs", len(batched), len(files)))
	}
	sort.Slice(batched, func(i, j int) bool { return baseName(batched[i]) < baseName(batched[j]) })
	for _, output := range batched {
		fmt.Printf("batch: %s %s lines=%d\n", baseName(output), statusName(output), field(output, "lines"))
	}

	// 5. An agent that is not there: NOT_FOUND, with a message saying which.
	ctx, cancel = callContext()
	defer cancel()
	_, err = agents.Execute(ctx, &etherv1.ExecuteRequest{
		Input: &etherv1.AgentInput{Agent: "no-such-agent", Action: "anything"},
	})
	if err == nil {
		fail("missing agent", errors.New("the call succeeded"))
	}
	st := status.Convert(err)
	if st.Code() != codes.NotFound {
		fail("missing agent", err) // any other failure is the tour's, not the answer it shows
	}
	// code.Code spells gRPC codes as the proto does (NOT_FOUND); codes.Code says NotFound.
	fmt.Printf("missing agent: %s: %s\n", code.Code(st.Code()), st.Message())
}

// transportCredentials is plaintext, or TLS when ETHER_TLS_CA is set: the host's certificate
// must be signed by that CA, and ETHER_TLS_CLIENT_CERT with ETHER_TLS_CLIENT_KEY is the client
// certificate a host with a client CA asks for.
func transportCredentials() (credentials.TransportCredentials, error) {
	ca := os.Getenv("ETHER_TLS_CA")
	if ca == "" {
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", ca)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert := os.Getenv("ETHER_TLS_CLIENT_CERT"); cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, os.Getenv("ETHER_TLS_CLIENT_KEY"))
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(config), nil
}

// callContext gives one call its deadline and, when ETHER_TOKEN is set, its bearer token.
func callContext() (context.Context, context.CancelFunc) {
	ctx := context.Background()
	if token := os.Getenv("ETHER_TOKEN"); token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return context.WithTimeout(ctx, deadline)
}

// task builds one input for scout; structpb turns plain Go values into the Struct params.
func task(action string, params map[string]any) *etherv1.AgentInput {
	st, err := structpb.NewStruct(params)
	check("params", err)
	return &etherv1.AgentInput{Agent: "scout", Action: action, Params: st}
}

// succeeded stops the tour when a task ran but failed: the reason is in the output, not the RPC.
func succeeded(what string, output *etherv1.AgentOutput) *etherv1.AgentOutput {
	if output.GetStatus() != etherv1.TaskStatus_TASK_STATUS_SUCCESS {
		fail(what, fmt.Errorf("task %s: %s: %s", statusName(output),
			output.GetError().GetCode(), output.GetError().GetMessage()))
	}
	return output
}

// statusName is the task's status without its enum prefix: SUCCESS, ERROR or PARTIAL.
func statusName(output *etherv1.AgentOutput) string {
	return strings.TrimPrefix(output.GetStatus().String(), "TASK_STATUS_")
}

// field reads a number from the output's data. JSON numbers travel as doubles, so the counts
// the agent sent as integers come back as float64 and are turned back into integers here.
func field(output *etherv1.AgentOutput, name string) int64 {
	return int64(output.GetData().GetStructValue().GetFields()[name].GetNumberValue())
}

func baseName(output *etherv1.AgentOutput) string {
	return filepath.Base(output.GetData().GetStructValue().GetFields()["path"].GetStringValue())
}

func check(what string, err error) {
	if err != nil {
		fail(what, err)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "tour: %s: %v\n", what, err)
	os.Exit(1)
}
