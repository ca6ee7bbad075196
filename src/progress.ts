/**
 * Progress of long work (a metering backfill, a store copy, a schema migration) for whoever runs it:
 * on a terminal one line redrawn in place (done, total, percent, rate, time left) at most ten times a
 * second; elsewhere (a pipe, a file, a journal) a plain line now and then, so logs stay readable.
 *
 *   const progress = new Progress('copying events', total);
 *   for (...) progress.advance(batch.length);
 *   progress.finish();
 */

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface ProgressOptions {
  /** Default: stderr, so a command's own output on stdout stays clean. */
  stream?: ProgressStream;
  /** Off a terminal, one line this often (default 10 s). */
  lineEveryMs?: number;
  /** The clock, in ms (tests). */
  now?: () => number;
}

/** On a terminal, redrawn at most this often: the eye reads no faster, and each redraw is a write. */
const REDRAW_EVERY_MS = 100;
const CLEAR_LINE = '\r\x1b[2K';

export class Progress {
  private done = 0;
  private readonly startedAt: number;
  private lastShown = -Infinity;
  private finished = false;
  private readonly stream: ProgressStream;
  private readonly live: boolean;
  private readonly everyMs: number;
  private readonly now: () => number;

  constructor(
    private readonly label: string,
    /** The amount of work, when known. */
    private total?: number,
    options: ProgressOptions = {},
  ) {
    this.stream = options.stream ?? process.stderr;
    this.live = this.stream.isTTY === true;
    this.everyMs = this.live ? REDRAW_EVERY_MS : (options.lineEveryMs ?? 10_000);
    this.now = options.now ?? Date.now;
    this.startedAt = this.now();
  }

  /** The total became known or changed. */
  setTotal(total: number): void {
    this.total = total;
  }

  advance(by = 1): void {
    this.done += by;
    const now = this.now();
    if (now - this.lastShown < this.everyMs) return;
    this.lastShown = now;
    this.show(false);
  }

  /** The last line (with the time taken); a live line is left on the screen. Only once. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.show(true);
  }

  /** The line as it reads now, e.g. `copying events: 12,000/48,000 (25%), 4,000/s, about 9s left`. */
  describe(final = false): string {
    const elapsedSec = Math.max(this.now() - this.startedAt, 1) / 1000;
    const rate = this.done / elapsedSec;
    const { total } = this;
    let text = `${this.label}: ${count(this.done)}`;
    if (total !== undefined) text += `/${count(total)} (${total === 0 ? 100 : Math.min(100, Math.floor((this.done / total) * 100))}%)`;
    if (final) return `${text}, done in ${duration(elapsedSec)}`;
    text += `, ${count(Math.round(rate))}/s`;
    if (total !== undefined && rate > 0 && total > this.done) text += `, about ${duration((total - this.done) / rate)} left`;
    return text;
  }

  private show(final: boolean): void {
    const line = this.describe(final);
    this.stream.write(this.live ? CLEAR_LINE + line + (final ? '\n' : '') : line + '\n');
  }
}

function count(n: number): string {
  return n.toLocaleString('en-US');
}

function duration(seconds: number): string {
  if (seconds < 60) return `${Math.max(1, Math.round(seconds))}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, '0')}m`;
}
