/**
 * One log file, appended to in the background: the log phase only adds a line to memory, and the lines
 * of the last FLUSH_AFTER_MS go to the file in one write (O_APPEND, so the node's processes can share the
 * file, each write whole). Measured with two workers appending to one file: a write per event-loop turn
 * tripled the CPU a request costs; a write per 10 ms is a few percent. The file is opened once and kept open, as Kong keeps its descriptor: a file renamed
 * away (rotation) goes on receiving lines until it is opened again, on SIGUSR1 or, with `reopen`, before
 * the next write. A file that cannot be opened (its directory is missing, it is a directory, no
 * permission) loses the lines, with one error logged until it can be opened again.
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Logger } from 'pino';

/** Lines waiting for a slow disk beyond this many bytes are dropped (counted), so that memory stays bounded. */
const MAX_PENDING_BYTES = 16 * 1024 * 1024;

/** How long lines wait to share a write: what a crash of the process may lose. */
const FLUSH_AFTER_MS = 10;
/** Lines written at once when this many bytes wait, without waiting for the delay. */
const FLUSH_AT_BYTES = 256 * 1024;

/** Kong's mode for a file it creates: rw-r--r--. */
const FILE_MODE = 0o644;

export class LogFile {
  private handle: FileHandle | undefined;
  private pending: string[] = [];
  private pendingBytes = 0;
  private reopenWanted = false;
  private flushing: Promise<void> | undefined;
  /** An error was logged and the file has not been written since. */
  private failing = false;

  constructor(
    readonly path: string,
    private readonly log: Logger,
    /** Counts lines lost: the file could not be opened or written, or too many waited. */
    private readonly lost: (reason: 'backlog' | 'unwritable', count: number) => void,
  ) {}

  /** Queues a line (JSON, no line feed); with `reopen` the file is opened again before it is written. */
  write(line: string, reopen: boolean): void {
    if (this.pendingBytes + line.length > MAX_PENDING_BYTES) return this.lost('backlog', 1);
    this.pending.push(line);
    this.pendingBytes += line.length + 1;
    if (reopen) this.reopenWanted = true;
    this.flushing ??= this.flush();
    if (this.pendingBytes >= FLUSH_AT_BYTES) this.writeNow?.();
  }

  /** The same file under a new configuration (a relative path whose base moved is another file). */
  reconfigure(path: string): boolean {
    return path === this.path;
  }

  /** Opens the file again before the next write (SIGUSR1: it was rotated). */
  reopen(): void {
    this.reopenWanted = true;
  }

  /** Ends the current wait for more lines. */
  private writeNow: (() => void) | undefined;

  private async flush(): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, FLUSH_AFTER_MS);
      this.writeNow = done;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    });
    this.writeNow = undefined;
    while (this.pending.length > 0) {
      const lines = this.pending;
      this.pending = [];
      this.pendingBytes = 0;
      try {
        const handle = await this.opened();
        await handle.appendFile(lines.join('\n') + '\n');
        if (this.failing) this.log.info({ path: this.path }, `file-log: writing to ${this.path} again`);
        this.failing = false;
      } catch (err) {
        this.lost('unwritable', lines.length);
        await this.closeHandle();
        if (!this.failing) this.log.error({ err, path: this.path }, `file-log: failed to open or write the file ${this.path}: log lines are lost until it can be`);
        this.failing = true;
      }
    }
    this.flushing = undefined;
  }

  private async opened(): Promise<FileHandle> {
    if (this.reopenWanted) {
      this.reopenWanted = false;
      await this.closeHandle();
    }
    return (this.handle ??= await open(this.path, 'a', FILE_MODE));
  }

  private async closeHandle(): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    await handle?.close().catch(() => {});
  }

  /** Writes what waits, then closes the file. */
  async close(): Promise<void> {
    this.writeNow?.();
    await this.flushing;
    await this.closeHandle();
  }
}
