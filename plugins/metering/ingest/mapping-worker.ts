/**
 * Collector mappings run in a process of their own, so that what one evaluation costs is bounded by
 * construction, not by JSONata's own guardrails, which it checks only between evaluation steps: one
 * step may be a regular expression (`$match(tag, /(a|aa)+$/)` held the event loop 2.5 s), a `$pad` to
 * 50 million characters (a 50 MB event from a 26-byte body), a `$distinct` quadratic in its 100,000
 * items (7 s). Here:
 * - time: the process reports the evaluation it starts (at most twice a budget, not per event); one
 *   still running 1.5 to 3 budgets after it started (or its batch, when it is the first) is stopped by
 *   killing the process; the request gets COLLECTOR_TIMEOUT and the next batch a fresh process;
 * - memory: the process's heap is capped (`--max-old-space-size`); a mapping that exhausts it ends that
 *   process, not the gateway (COLLECTOR_TOO_LARGE). A worker thread's `resourceLimits` do not: a 400 MB
 *   string made in one step took the whole gateway down with V8's fatal out-of-memory error;
 * - output: each event a mapping yields is at most MAX_MAPPED_EVENT_BYTES serialized, and the events of
 *   one request at most the route's `max_body_size` (what the client could have posted itself);
 * - regular expressions run on RE2 (re2js: linear time), as every other operator regex.
 *
 * One mapping process per gateway process; batches (a request's evaluations) run one after the other, a
 * few sent ahead: requests queue behind a slow mapping, never the event loop. Results come back as JSON
 * text, the size that was checked.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../../src/pdk/index.ts';
import { createRequire } from 'node:module';

/** OpenMeter's practical ceiling for one event (its Kafka producer's default message size). */
export const MAX_MAPPED_EVENT_BYTES = 1024 * 1024;
/** Most events one evaluation may yield. */
export const MAX_EVENTS_PER_EVALUATION = 10_000;
/** JSONata's guardrails besides the time budget: nesting depth and sequence size. */
const MAX_DEPTH = 200;
const MAX_SEQUENCE = 100_000;

export interface MappingJob {
  mapping: string;
  input: unknown;
}

/** Why an evaluation failed: a JSONata code (D1012 the time budget), COLLECTOR_TOO_LARGE, COLLECTOR_INVALID_RESULT. */
export interface MappingFailure {
  /** The job that failed (those before it succeeded; those after it did not run). */
  index: number;
  code?: string;
  message: string;
}

export interface MappingResults {
  /** Per job that ran: its result as JSON text, null when it yields nothing. */
  outputs: (string | null)[];
  failure?: MappingFailure;
}

export interface MappingLimits {
  /** Per evaluation (`collector_timeout_ms`). */
  timeoutMs: number;
  /** The mapping process's heap. */
  heapMb: number;
}

interface Batch {
  jobs: MappingJob[];
  maxTotalBytes: number;
  resolve(results: MappingResults): void;
  reject(err: Error): void;
}

/** The mapping process's program (a file of the package: node runs it as it is). */
const MAPPING_PROCESS = join(PACKAGE_ROOT, 'plugins/metering/ingest/mapping-process.cjs');

const resolveModule = createRequire(import.meta.url).resolve;

type WorkerMessage = MappingResults | { started: number } | 'ready';

/**
 * Batches sent ahead to the process: its evaluating overlaps the trips of the messages (a few hundred µs
 * each way), which one batch at a time spent waiting. Few, since each holds its input in the process's heap.
 */
const MAX_IN_FLIGHT = 4;

export class MappingWorker {
  private child: ChildProcess | undefined;
  private ready = false;
  private heapMb = 0;
  /** Batches not yet sent. */
  private readonly queue: Batch[] = [];
  /** Batches sent, answered in this order: the first is the one running. */
  private readonly sent: Batch[] = [];
  /** The job of the running batch last known started, and when (undefined: no batch out). */
  private started = 0;
  private startedAt: number | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private limits: MappingLimits) {}

  /** New limits: a process with another heap size is replaced once idle. */
  configure(limits: MappingLimits): void {
    this.limits = limits;
    if (this.child && this.heapMb !== limits.heapMb && this.sent.length === 0) this.retire();
  }

  /** Starts the process ahead of the first request (it takes some 100 ms to load JSONata). */
  warm(): void {
    if (!this.child && !this.closed) this.spawn();
  }

  /** Evaluates the jobs in order, stopping at the first failure. */
  run(jobs: MappingJob[], maxTotalBytes: number): Promise<MappingResults> {
    if (this.closed) return Promise.reject(new Error('the collector mapping process is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ jobs, maxTotalBytes, resolve, reject });
      this.dispatch();
    });
  }

  close(): void {
    this.closed = true;
    for (const batch of this.queue.splice(0).concat(this.sent.splice(0))) batch.reject(new Error('the collector mapping process is closed'));
    this.retire();
  }

  private dispatch(): void {
    if (this.closed || this.queue.length === 0) return;
    if (!this.child || (this.heapMb !== this.limits.heapMb && this.sent.length === 0)) {
      this.retire();
      this.spawn();
    }
    if (!this.ready) return;
    while (this.queue.length > 0 && this.sent.length < MAX_IN_FLIGHT) {
      const batch = this.queue.shift()!;
      if (this.sent.length === 0) this.running(0);
      this.sent.push(batch);
      this.child!.send({ jobs: batch.jobs, timeoutMs: this.limits.timeoutMs, maxTotalBytes: batch.maxTotalBytes });
    }
    this.watch();
  }

  /** The running batch began (its first job), or reported job `index` started. */
  private running(index: number): void {
    this.started = index;
    this.startedAt = performance.now();
  }

  /**
   * Once per budget while batches are out: the evaluation last known started must not be older than two
   * budgets (the process reports at most twice a budget, so one that keeps starting evaluations is never
   * that far behind; a batch begins when the one before it is answered, or when sent to an idle process);
   * else it has run that long in one go, and the process is killed.
   */
  private watch(): void {
    if (this.watchdog) return;
    const budget = this.limits.timeoutMs;
    this.watchdog = setInterval(() => {
      if (this.sent.length === 0) return this.stopWatching();
      if (this.startedAt !== undefined && performance.now() - this.startedAt > 2 * budget) {
        this.fail({ index: this.started, code: 'D1012', message: 'the evaluation was stopped after its time budget' });
      }
    }, budget);
    this.watchdog.unref();
  }

  private stopWatching(): void {
    clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  /** The running batch fails with `failure` and the process ends; the batches sent after it go again. */
  private fail(failure: MappingFailure): void {
    const running = this.sent.shift();
    this.queue.unshift(...this.sent.splice(0));
    this.retire();
    running?.resolve({ outputs: [], failure });
    this.dispatch();
  }

  private spawn(): void {
    this.heapMb = this.limits.heapMb;
    const settings = {
      jsonata: resolveModule('jsonata'),
      re2js: resolveModule('re2js'),
      maxDepth: MAX_DEPTH,
      maxSequence: MAX_SEQUENCE,
      maxEventBytes: MAX_MAPPED_EVENT_BYTES,
      maxEvents: MAX_EVENTS_PER_EVALUATION,
    };
    // stderr ignored: what V8 prints when a mapping exhausts the heap is not the gateway's log.
    const child = spawn(process.execPath, [`--max-old-space-size=${this.heapMb}`, MAPPING_PROCESS, JSON.stringify(settings)], {
      // JSON, not 'advanced': inputs are parsed JSON, outputs JSON text, and it costs the gateway 40% less.
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    });
    // It must not keep the gateway alive: close() ends it, and an exiting gateway may skip that.
    child.unref();
    child.channel?.unref();
    this.child = child;
    this.ready = false;
    child.on('message', (message: WorkerMessage) => {
      if (this.child !== child) return; // a process the watchdog killed, answering late
      if (message === 'ready') this.ready = true;
      else if ('started' in message) return this.running(message.started);
      else {
        this.sent.shift()?.resolve(message);
        if (this.sent.length > 0) this.running(0);
      }
      this.dispatch();
    });
    child.on('error', (err) => this.lost(child, err));
    child.on('exit', (code, signal) => this.lost(child, new Error(`the collector mapping process exited (${signal ?? code})`), signal === 'SIGABRT'));
  }

  /**
   * The process ended on its own. Aborted by V8 (out of memory): the running batch is refused as too
   * large. Else the running batch fails with the error; before the process was ready, the waiting ones
   * too (a process that cannot start would not start again).
   */
  private lost(child: ChildProcess, err: Error, outOfMemory = false): void {
    if (this.child !== child) return;
    if (outOfMemory && this.sent.length > 0) return this.fail({ index: this.started, code: 'COLLECTOR_TOO_LARGE', message: 'the mapping needs more memory than it may use' });
    const failed = this.ready ? this.sent.splice(0, 1) : this.queue.splice(0);
    this.queue.unshift(...this.sent.splice(0));
    this.retire();
    for (const batch of failed) batch.reject(err);
    this.dispatch();
  }

  private retire(): void {
    const child = this.child;
    this.child = undefined;
    this.ready = false;
    this.startedAt = undefined;
    this.stopWatching();
    child?.kill('SIGKILL');
  }
}
