/**
 * How a node is told to stop: SIGTERM or SIGINT to its process (the primary of a node of several
 * processes), or, under `npm start`, npm going away.
 *
 * One stop, however many signals: a terminal's Ctrl-C reaches every process of its foreground process
 * group, npm among them, and npm relays it to its child, so one keypress arrives twice; systemd and
 * impatient operators send SIGTERM again. Node's default action for a signal nobody listens to any more
 * (after a `process.once`) is to die on the spot, which would lose what the stop was writing. So every
 * signal is listened to for good, the first one stops, and the next ones change nothing: the wait for
 * in-flight requests is bounded by `shutdown_timeout` already, and nothing after it can be cut short
 * without losing answered requests' usage (`kill -9` is there for that).
 */
import type { Logger } from '../log.ts';

export const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;
/** How often a gateway started by npm checks that npm is still there. */
const PARENT_CHECK_MS = 1000;

/** Calls `stop` with its reason once, on the first stop signal (or npm's exit); later ones are logged and ignored. */
export function stopOnSignals(stop: (reason: string) => void, log: Logger): void {
  let stopping = false;
  const stopOnce = (reason: string) => {
    if (stopping) return log.info({ reason }, 'already shutting down: in-flight requests finish within shutdown_timeout');
    stopping = true;
    stop(reason);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, () => stopOnce(signal));
  stopWhenNpmExits(() => stopOnce('npm exited'));
}

/**
 * `npm start` runs the gateway as npm's child and relays SIGINT and SIGTERM to it, but npm dies of
 * any other signal (SIGHUP, SIGKILL) and leaves its child running, holding the ports and the data
 * directory. Under npm, the gateway stops when its parent changes.
 */
function stopWhenNpmExits(stop: () => void): void {
  if (!process.env.npm_lifecycle_event) return;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    stop();
  }, PARENT_CHECK_MS).unref();
}
