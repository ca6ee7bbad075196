/**
 * PBKDF2 on worker threads of its own. `crypto.pbkdf2` runs on libuv's four threads, which LevelDB's
 * reads and writes wait for too: 2,500 wrong client secrets once delayed every store operation
 * (metering acks 3 ms → 0.8–3 s). Here each worker derives one key at a time and the queue is bounded:
 * past it, `derive` fails at once with RequestLimitError.hashingBusy instead of queueing without end.
 *
 * The workers run at a lower scheduling priority (Linux: a thread's own nice value), so that when the
 * CPU is short, derivations for anonymous callers wait and the event loop, the store's threads and the
 * other processes of the machine do not. Derivations marked `urgent` (a caller whose address verified
 * that credential before: most likely its owner) have a queue of their own, served first, so a flood of
 * guesses neither delays nor crowds them out.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { RequestLimitError } from './limits.ts';
import type { Pbkdf2Job } from './secrets.ts';

interface Pending {
  job: Pbkdf2Job;
  resolve(key: Buffer): void;
  reject(err: Error): void;
}

/** Half the cores: hashing for anonymous callers never takes the whole machine. */
const DEFAULT_WORKERS = Math.max(1, Math.floor(availableParallelism() / 2));
/** At ~15 ms a derivation, a full queue waits about half a second. */
const QUEUED_PER_WORKER = 32;
/** How much nicer than the process the workers are: they get about a tenth of a core the event loop wants too. */
const WORKER_NICENESS = 10;
/**
 * A worker: one derivation at a time, synchronously on its own thread. Plain CommonJS source, because a
 * worker does not inherit the TypeScript loader the gateway runs under. On Linux, setpriority() with a
 * thread's id lowers that thread alone (its id is the last part of /proc/thread-self); elsewhere the
 * worker keeps the process's priority.
 */
const WORKER_SOURCE = `
const { pbkdf2Sync } = require('node:crypto');
const { readlinkSync } = require('node:fs');
const { getPriority, setPriority } = require('node:os');
const { parentPort } = require('node:worker_threads');
try {
  const thread = Number(readlinkSync('/proc/thread-self').split('/').pop());
  setPriority(thread, Math.min(19, getPriority(thread) + ${WORKER_NICENESS}));
} catch {}
parentPort.on('message', (job) => parentPort.postMessage(pbkdf2Sync(job.secret, job.salt, job.iterations, job.keyLength, job.digest)));
`;

export class KdfPool {
  private readonly idle: Worker[] = [];
  private readonly running = new Map<Worker, Pending>();
  private readonly queue: Pending[] = [];
  private readonly urgentQueue: Pending[] = [];
  private closed = false;

  constructor(
    private readonly workers = DEFAULT_WORKERS,
    private readonly maxQueued = workers * QUEUED_PER_WORKER,
  ) {}

  /** The derived key; `urgent` jobs go before every other waiting job, in a queue bounded as the other. */
  derive(job: Pbkdf2Job, urgent = false): Promise<Buffer> {
    if (this.closed) return Promise.reject(new Error('the key derivation pool is closed'));
    const queue = urgent ? this.urgentQueue : this.queue;
    if (queue.length >= this.maxQueued) return Promise.reject(RequestLimitError.hashingBusy());
    return new Promise((resolve, reject) => {
      queue.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const pending of [...this.urgentQueue.splice(0), ...this.queue.splice(0)]) pending.reject(new Error('the key derivation pool is closed'));
    await Promise.all([...this.idle, ...this.running.keys()].map((worker) => worker.terminate()));
  }

  private dispatch(): void {
    while (this.urgentQueue.length > 0 || this.queue.length > 0) {
      const worker = this.idle.pop() ?? (this.running.size < this.workers ? this.spawn() : undefined);
      if (!worker) return;
      const pending = (this.urgentQueue.shift() ?? this.queue.shift())!;
      this.running.set(worker, pending);
      worker.postMessage(pending.job);
    }
  }

  private spawn(): Worker {
    // Workers must not keep the process alive: close() ends them, and an exiting process may skip it.
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    worker.unref();
    worker.on('message', (key: Uint8Array) => {
      const pending = this.running.get(worker);
      this.running.delete(worker);
      this.idle.push(worker);
      pending?.resolve(Buffer.from(key));
      this.dispatch();
    });
    worker.on('error', (err) => this.retire(worker, err));
    worker.on('exit', (code) => this.retire(worker, new Error(`a key derivation worker exited with code ${code}`)));
    return worker;
  }

  /** A worker that failed or exited: its job fails, and a new worker takes the queue on. */
  private retire(worker: Worker, err: Error): void {
    const pending = this.running.get(worker);
    this.running.delete(worker);
    const at = this.idle.indexOf(worker);
    if (at >= 0) this.idle.splice(at, 1);
    pending?.reject(err);
    if (!this.closed) this.dispatch();
  }
}
