// Host death (docs/protocol.md rule 12): poll the parent pid every second; when the host is
// gone, kill the own process group so no grandchild survives it.

export interface HostWatch {
  stop(): void;
}

export interface HostWatchOptions {
  /** ETHER_HOST_PPID: the host's pid. */
  hostPid: number | undefined;
  /** Poll interval in ms (default 1000). */
  intervalMs?: number;
  /** Called once when the host is gone. */
  onDeath: (why: string) => void;
  /** Injected for tests. */
  ppid?: () => number;
  alive?: (pid: number) => boolean;
}

/** Starts the poll; the timer never keeps the process alive. */
export function watchHost(options: HostWatchOptions): HostWatch {
  const ppid = options.ppid ?? (() => process.ppid);
  const alive = options.alive ?? pidAlive;
  const startPpid = ppid();
  const check = (): string | undefined => {
    const now = ppid();
    if (now !== startPpid) return `parent pid changed from ${startPpid} to ${now}`;
    const host = options.hostPid;
    if (host !== undefined && host > 1 && host !== startPpid && !alive(host)) return `host pid ${host} is gone`;
    return undefined;
  };
  const timer = setInterval(() => {
    const why = check();
    if (why !== undefined) {
      clearInterval(timer);
      options.onDeath(why);
    }
  }, options.intervalMs ?? 1000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Kills the own process group (children included), then the process itself. */
export function killOwnGroup(diag: (line: string) => void): void {
  try {
    // Only a group leader's pid names its group; the host spawns agents as group leaders.
    process.kill(-process.pid, "SIGKILL");
  } catch (err) {
    diag(`ether-agent: could not kill the process group (${(err as Error).message}); exiting alone`);
  }
  process.kill(process.pid, "SIGKILL");
}
