// A plain-function module, served by the runtime as the one action `run`.
export default function echo(payload: unknown): unknown {
  console.log("plain function called");
  return { echoed: payload };
}
