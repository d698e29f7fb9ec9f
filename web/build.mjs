// Bundles the console (src/main.ts, src/style.css, src/index.html) into dist/, which the host
// serves at / (server/ether_host/http/console.py). `make setup` runs it; `--watch` rebuilds on
// change. No CDN: everything the page loads is in dist/.
import { copyFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "dist");

// The generated stubs live in clients/typescript and import @bufbuild/protobuf, which would
// resolve to that package's own copy: one runtime in the bundle, this package's (same version).
const oneProtobuf = {
  name: "one-protobuf-runtime",
  setup(build) {
    build.onResolve({ filter: /^@bufbuild\/protobuf(\/.*)?$/ }, async (args) => {
      if (args.pluginData === "one-protobuf-runtime") return undefined;
      const found = await build.resolve(args.path, {
        kind: args.kind,
        resolveDir: here,
        pluginData: "one-protobuf-runtime",
      });
      return { path: found.path, errors: found.errors };
    });
  },
};

const options = {
  entryPoints: [path.join(here, "src/main.ts"), path.join(here, "src/style.css")],
  outdir: dist,
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  sourcemap: true,
  legalComments: "linked",
  logLevel: "warning",
  plugins: [oneProtobuf],
};

await mkdir(dist, { recursive: true });
await copyFile(path.join(here, "src/index.html"), path.join(dist, "index.html"));
if (process.argv.includes("--watch")) {
  const context = await esbuild.context(options);
  await context.watch();
} else {
  await esbuild.build(options);
}
