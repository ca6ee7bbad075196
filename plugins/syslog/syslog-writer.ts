/**
 * One syslog destination: a long-lived `logger` process (util-linux) writing the lines it reads on stdin to
 * the daemon's Unix datagram socket, which Node cannot open itself. Each line carries its own `<PRI>`; the
 * tag is `kong` and the process id this gateway process's, as Kong's `openlog("kong", LOG_PID, facility)`
 * shows. The process starts with the first line and is started again, after a growing pause, when it exits.
 * A daemon that is not there loses its lines in logger, which tries the socket again for the next one.
 * Nothing waits without bound: lines beyond what logger's stdin may hold, or sent while it cannot run, are
 * lost and counted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import type { KeyedResource } from '../../src/pdk/index.ts';

/** The longest line sent (a datagram of its own); a longer entry is lost rather than split. */
export const MAX_LINE_BYTES = 64 * 1024;
/** Bytes that may wait for logger (a slow daemon); beyond, lines are lost. */
const MAX_WAITING_BYTES = 4 * 1024 * 1024;
const FIRST_RESTART_DELAY_MS = 100;
const MAX_RESTART_DELAY_MS = 30_000;
/** How long logger may take to send what it read once its stdin is closed. */
const CLOSE_GRACE_MS = 2000;
/** The end of logger's complaints kept for the log line about its exit. */
const STDERR_KEPT = 1024;

export type LostReason = 'too_large' | 'backlog' | 'unavailable';

export class SyslogWriter implements KeyedResource<string> {
  private child: ChildProcess | undefined;
  private restartAt = 0;
  private restartDelayMs = FIRST_RESTART_DELAY_MS;
  private closed = false;

  constructor(
    private readonly socketPath: string,
    private readonly log: Logger,
    private readonly lost: (reason: LostReason) => void,
  ) {}

  /** The same socket; a relative path whose base moved is another socket, and another logger. */
  reconfigure(socketPath: string): boolean {
    return socketPath === this.socketPath;
  }

  /** `line` is one JSON text (never a raw newline) after its `<PRI>`. */
  send(line: string): void {
    if (Buffer.byteLength(line) > MAX_LINE_BYTES) return this.lost('too_large');
    const stdin = this.running()?.stdin;
    if (!stdin) return this.lost('unavailable');
    if (stdin.writableLength > MAX_WAITING_BYTES) return this.lost('backlog');
    stdin.write(line + '\n');
  }

  private running(): ChildProcess | undefined {
    if (this.child || this.closed || Date.now() < this.restartAt) return this.child;
    return (this.child = this.start());
  }

  private start(): ChildProcess {
    const args = ['--prio-prefix', '--tag', 'kong', `--id=${process.pid}`, '--socket-errors=off', '--size', String(MAX_LINE_BYTES), '--socket', this.socketPath];
    const child = spawn('logger', args, { stdio: ['pipe', 'ignore', 'pipe'] });
    const startedAt = Date.now();
    let complaint = '';
    child.stderr!.on('data', (chunk: Buffer) => (complaint = (complaint + chunk.toString()).slice(-STDERR_KEPT)));
    // A logger that died leaves writes failing with EPIPE; its exit is what is reported.
    child.stdin!.on('error', () => {});
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      if (this.child === child) this.child = undefined;
      if (!this.closed) this.scheduleRestart(why + (complaint ? `: ${complaint.trim()}` : ''), Date.now() - startedAt);
    };
    child.once('error', (err) => end(`could not run logger (util-linux): ${err.message}`));
    child.once('close', (code, signal) => end(`logger exited (${signal ?? code})`));
    return child;
  }

  /** A logger that ran a while is started again soon; one that keeps failing, after pauses doubling up to 30 s. */
  private scheduleRestart(why: string, ranForMs: number): void {
    if (ranForMs > MAX_RESTART_DELAY_MS) this.restartDelayMs = FIRST_RESTART_DELAY_MS;
    this.log.error({ socket: this.socketPath }, `syslog: ${why}; starting it again in ${this.restartDelayMs} ms`);
    this.restartAt = Date.now() + this.restartDelayMs;
    this.restartDelayMs = Math.min(this.restartDelayMs * 2, MAX_RESTART_DELAY_MS);
  }

  /** Lets logger send what it read, then ends it. */
  close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (!child) return Promise.resolve();
    return new Promise((resolve) => {
      const kill = setTimeout(() => child.kill('SIGKILL'), CLOSE_GRACE_MS);
      child.once('close', () => {
        clearTimeout(kill);
        resolve();
      });
      child.stdin!.end();
    });
  }
}
