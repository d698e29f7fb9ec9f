// Builds dist/ with this package's own TypeScript. npm runs it on `npm install` here and also
// when a consumer (an agent with "@ether/agent": "file:...") installs this folder as a link;
// in that case this folder's devDependencies may not be installed yet, so they are installed
// first (from package-lock.json). A build that is newer than every source is kept as is.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const lock = join(root, "node_modules", ".ether-prepare.lock");

function newest(path) {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((name) => newest(join(path, name))));
}

function upToDate() {
  const built = join(root, "dist", "index.js");
  if (!existsSync(built) || !existsSync(join(root, "dist", "runtime.js"))) return false;
  const sources = Math.max(
    newest(join(root, "src")),
    newest(join(root, "tsconfig.json")),
    newest(join(root, "package.json")),
  );
  return statSync(built).mtimeMs >= sources;
}

function run(cmd, args, env = process.env) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: ["ignore", 2, 2], env });
  if (r.status !== 0) {
    process.stderr.write(`@ether/agent prepare: ${cmd} ${args.join(" ")} failed (${r.error?.message ?? `exit ${r.status}`})\n`);
    process.exit(r.status ?? 1);
  }
}

// Two consumers may install at once: one builder at a time.
async function withLock(fn) {
  mkdirSync(join(root, "node_modules"), { recursive: true });
  for (let i = 0; ; i++) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
      if (Date.now() - statSync(lock).mtimeMs > 5 * 60_000) rmSync(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

await withLock(() => {
  if (upToDate()) return;
  if (!existsSync(tsc) || !existsSync(join(root, "node_modules", "@types", "node"))) {
    // The parent install's npm_* settings (omit=dev, global, ...) must not leak into this one.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !/^npm_/i.test(k) || /^npm_config_(registry|cache|userconfig)$/i.test(k),
      ),
    );
    delete env.NODE_ENV;
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const args = existsSync(join(root, "package-lock.json")) ? ["ci"] : ["install"];
    run(npm, [...args, "--ignore-scripts", "--include=dev", "--no-audit", "--no-fund", "--loglevel=error"], env);
  }
  run(process.execPath, [tsc, "-p", "tsconfig.json"]);
});
