// The host's services, through the stubs clients/typescript generates (protobuf-es v2), over
// Connect at /rpc (server/ether_host/transport/console_rpc.py) and, for client and bidi
// streams, the WebSocket bridge at /rpc-ws (bridge.ts).
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AgentIOService } from "../../clients/typescript/src/gen/ether/v1/agent_io_pb.js";
import { GatewayService } from "../../clients/typescript/src/gen/ether/v1/gateway_pb.js";
import { SupervisorService } from "../../clients/typescript/src/gen/ether/v1/supervisor_pb.js";
import { TerminalService } from "../../clients/typescript/src/gen/ether/v1/terminal_pb.js";
import { WorkflowService } from "../../clients/typescript/src/gen/ether/v1/workflow_pb.js";

export * from "../../clients/typescript/src/gen/ether/v1/agent_io_pb.js";
export * from "../../clients/typescript/src/gen/ether/v1/common_pb.js";
export * from "../../clients/typescript/src/gen/ether/v1/gateway_pb.js";
export * from "../../clients/typescript/src/gen/ether/v1/supervisor_pb.js";
export * from "../../clients/typescript/src/gen/ether/v1/terminal_pb.js";
export * from "../../clients/typescript/src/gen/ether/v1/workflow_pb.js";

const TOKEN_KEY = "ether.token";

/** The bearer token for this browser tab only (sessionStorage), or "" when none is set. */
export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(value: string): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** The same metadata a gRPC client sends: ``authorization: Bearer TOKEN``. */
export function authMetadata(): Record<string, string> {
  const value = token();
  return value ? { authorization: `Bearer ${value}` } : {};
}

const withToken: Interceptor = (next) => async (request) => {
  for (const [name, value] of Object.entries(authMetadata())) request.header.set(name, value);
  return next(request);
};

const transport = createConnectTransport({
  baseUrl: new URL("/rpc", location.origin).toString(),
  useBinaryFormat: true,
  interceptors: [withToken],
});

export const agents: Client<typeof AgentIOService> = createClient(AgentIOService, transport);
export const supervisor: Client<typeof SupervisorService> = createClient(SupervisorService, transport);
export const terminals: Client<typeof TerminalService> = createClient(TerminalService, transport);
export const gateway: Client<typeof GatewayService> = createClient(GatewayService, transport);
export const workflows: Client<typeof WorkflowService> = createClient(WorkflowService, transport);

/** What a person reads for a failed call: the host's status message, with its code. */
export function errorText(error: unknown): string {
  if (error instanceof DOMException && error.name === "AbortError") return "cancelled";
  const found = ConnectError.from(error);
  const code = Code[found.code]
    ?.replace(/([a-z])([A-Z])/g, "$1 $2")
    .toLowerCase();
  return `${found.rawMessage || "the call failed"} (${code ?? found.code})`;
}

export function isUnauthenticated(error: unknown): boolean {
  return ConnectError.from(error).code === Code.Unauthenticated;
}

export function isCancel(error: unknown): boolean {
  if (error instanceof DOMException && error.name === "AbortError") return true;
  return ConnectError.from(error).code === Code.Canceled;
}
