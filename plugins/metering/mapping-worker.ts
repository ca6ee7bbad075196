/**
 * Collector mappings run on a worker thread of their own, so that what one evaluation costs is bounded
 * by construction, not by JSONata's own guardrails, which it checks only between evaluation steps: one
 * step may be a regular expression (`$match(tag, /(a|aa)+$/)` held the event loop 2.5 s), a `$pad` to
 * 50 million characters (a 50 MB event from a 26-byte body), a `$distinct` quadratic in its 100,000
 * items (7 s). Here:
 * - time: a watchdog on the gateway's thread terminates the worker when one evaluation has not
 *   finished after one to two budgets (`collector_timeout_ms`); the request gets COLLECTOR_TIMEOUT and
 *   the next one a fresh worker;
 * - memory: the worker's heap is capped (`resourceLimits`); a mapping that fills it ends the worker,
 *   not the gateway, and gets COLLECTOR_TOO_LARGE;
 * - output: each event a mapping yields is at most MAX_MAPPED_EVENT_BYTES serialized, and the events of
 *   one request at most the route's `max_body_size` (what the client could have posted itself);
 * - regular expressions run on RE2 (re2js: linear time), as every other operator regex.
 *
 * One worker per process, one batch (a request's evaluations) at a time: requests queue behind a slow
 * mapping, never the event loop. Results come back as JSON text, the size that was checked.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

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
  /** Per job that ran: its result as JSON text, undefined when it yields nothing. */
  outputs: (string | undefined)[];
  failure?: MappingFailure;
}

export interface MappingLimits {
  /** Per evaluation (`collector_timeout_ms`). */
  timeoutMs: number;
  /** The worker's heap. */
  heapMb: number;
}

interface Batch {
  jobs: MappingJob[];
  maxTotalBytes: number;
  resolve(results: MappingResults): void;
  reject(err: Error): void;
}

/**
 * The worker: plain CommonJS source, since a worker inherits neither the TypeScript loader nor the
 * gateway's bundle. JSONata's `RegexEngine` is given RE2 through the shape JSONata uses of a RegExp
 * (`exec` from `lastIndex`, the match with its `index`).
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const jsonata = require(workerData.jsonata);
const { RE2JS } = require(workerData.re2js);
const started = new Int32Array(workerData.progress);
const { maxDepth, maxSequence, maxEventBytes, maxEvents } = workerData;

class LinearRegExp {
  constructor(pattern, flags) {
    const source = typeof pattern === 'string' ? pattern : pattern.source;
    const given = (typeof pattern === 'string' ? flags : pattern.flags) || '';
    const re2Flags = (given.includes('i') ? RE2JS.CASE_INSENSITIVE : 0) | (given.includes('m') ? RE2JS.MULTILINE : 0);
    try {
      this.re2 = RE2JS.compile(source, re2Flags).re2();
    } catch (err) {
      throw { code: 'TG0001', message: 'the regular expression /' + source + '/ is refused: ' + err.message };
    }
    this.source = source;
    this.groupCount = this.re2.numberOfCapturingGroups();
    this.lastIndex = 0;
  }
  exec(text) {
    const [found, positions] = this.re2.matchWithGroup(text, this.lastIndex, text.length, 0, this.groupCount + 1);
    if (!found) {
      this.lastIndex = 0;
      return null;
    }
    const match = [];
    for (let i = 0; i <= this.groupCount; i++) match.push(positions[2 * i] < 0 ? undefined : text.slice(positions[2 * i], positions[2 * i + 1]));
    match.index = positions[0];
    this.lastIndex = positions[1];
    return match;
  }
}

const expressions = new Map();
function expressionOf(mapping, timeoutMs) {
  const key = timeoutMs + '\\n' + mapping;
  let expression = expressions.get(key);
  if (!expression) {
    if (expressions.size >= 1000) expressions.clear();
    expression = jsonata(mapping, { timeout: timeoutMs, stack: maxDepth, sequence: maxSequence, RegexEngine: LinearRegExp });
    expressions.set(key, expression);
  }
  return expression;
}

function tooLarge(message) {
  return { code: 'COLLECTOR_TOO_LARGE', message };
}

/** The output as JSON text, each event within its size. */
function serialize(output) {
  if (output === undefined) return { json: undefined, bytes: 0 };
  const events = Array.isArray(output) ? output : [output];
  if (events.length > maxEvents) throw { code: 'COLLECTOR_INVALID_RESULT', message: 'the mapping yields ' + events.length + ' events, more than ' + maxEvents };
  let bytes = 0;
  const parts = events.map((event, index) => {
    const json = JSON.stringify(event) ?? 'null';
    const size = Buffer.byteLength(json);
    if (size > maxEventBytes) throw tooLarge('the mapping yields an event of ' + size + ' bytes at [' + index + '], more than ' + maxEventBytes);
    bytes += size;
    return json;
  });
  return { json: Array.isArray(output) ? '[' + parts.join(',') + ']' : parts[0], bytes };
}

parentPort.on('message', async ({ jobs, timeoutMs, maxTotalBytes }) => {
  const outputs = [];
  let total = 0;
  for (let index = 0; index < jobs.length; index++) {
    Atomics.add(started, 0, 1);
    try {
      const { json, bytes } = serialize(await expressionOf(jobs[index].mapping, timeoutMs).evaluate(jobs[index].input));
      total += bytes;
      if (total > maxTotalBytes) throw tooLarge('the mappings of this request yield ' + total + ' bytes of events, more than max_body_size (' + maxTotalBytes + ')');
      outputs.push(json);
    } catch (err) {
      const failure = { index, code: err && err.code, message: (err && err.message) || String(err) };
      parentPort.postMessage({ outputs, failure });
      return;
    }
  }
  parentPort.postMessage({ outputs });
});
parentPort.postMessage('ready');
`;

const resolveModule = createRequire(import.meta.url).resolve;

export class MappingWorker {
  private worker: Worker | undefined;
  private ready = false;
  private heapMb = 0;
  /** How many evaluations the worker has started: the watchdog's view of its progress. */
  private readonly progress = new Int32Array(new SharedArrayBuffer(4));
  private readonly queue: Batch[] = [];
  private running: Batch | undefined;
  /** The progress count when the running batch was sent. */
  private base = 0;
  private watchdog: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private limits: MappingLimits) {}

  /** New limits: a worker with another heap size is replaced once idle. */
  configure(limits: MappingLimits): void {
    this.limits = limits;
    if (this.worker && this.heapMb !== limits.heapMb && !this.running) this.retire();
  }

  /** Starts the worker ahead of the first request (it takes some 100 ms to load JSONata). */
  warm(): void {
    if (!this.worker && !this.closed) this.spawn();
  }

  /** Evaluates the jobs in order, stopping at the first failure. */
  run(jobs: MappingJob[], maxTotalBytes: number): Promise<MappingResults> {
    if (this.closed) return Promise.reject(new Error('the collector mapping worker is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ jobs, maxTotalBytes, resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const batch of this.queue.splice(0)) batch.reject(new Error('the collector mapping worker is closed'));
    this.finish()?.reject(new Error('the collector mapping worker is closed'));
    await this.worker?.terminate();
  }

  private dispatch(): void {
    if (this.running || this.queue.length === 0) return;
    if (!this.worker || this.heapMb !== this.limits.heapMb) {
      if (this.worker) this.retire();
      this.spawn();
    }
    if (!this.ready) return;
    const batch = (this.running = this.queue.shift()!);
    this.watch(this.limits.timeoutMs);
    this.worker!.postMessage({ jobs: batch.jobs, timeoutMs: this.limits.timeoutMs, maxTotalBytes: batch.maxTotalBytes });
  }

  /**
   * Every budget, the worker must have started another evaluation since the last look, else the one it
   * runs has taken a budget at least: it is terminated. Before its first evaluation starts (the batch is
   * still being copied over) nothing is counted.
   */
  private watch(timeoutMs: number): void {
    this.base = Atomics.load(this.progress, 0);
    let seen = this.base;
    this.watchdog = setInterval(() => {
      const now = Atomics.load(this.progress, 0);
      if (now !== this.base && now === seen) this.abort({ index: this.runningIndex(), code: 'D1012', message: 'the evaluation was stopped after its time budget' });
      seen = now;
    }, timeoutMs);
    this.watchdog.unref();
  }

  /** The job of the running batch the worker evaluates. */
  private runningIndex(): number {
    return Math.max(0, Atomics.load(this.progress, 0) - this.base - 1);
  }

  /** Ends the running batch with `failure` and the worker with it. */
  private abort(failure: MappingFailure): void {
    const batch = this.finish();
    this.retire();
    batch?.resolve({ outputs: [], failure });
    this.dispatch();
  }

  private finish(): Batch | undefined {
    clearInterval(this.watchdog);
    const batch = this.running;
    this.running = undefined;
    return batch;
  }

  private spawn(): void {
    this.heapMb = this.limits.heapMb;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        jsonata: resolveModule('jsonata'),
        re2js: resolveModule('re2js'),
        progress: this.progress.buffer,
        maxDepth: MAX_DEPTH,
        maxSequence: MAX_SEQUENCE,
        maxEventBytes: MAX_MAPPED_EVENT_BYTES,
        maxEvents: MAX_EVENTS_PER_EVALUATION,
      },
      resourceLimits: { maxOldGenerationSizeMb: this.limits.heapMb },
    });
    // The worker must not keep the process alive: close() ends it, and an exiting process may skip that.
    worker.unref();
    this.worker = worker;
    this.ready = false;
    worker.on('message', (message: MappingResults | 'ready') => {
      if (this.worker !== worker) return; // a worker the watchdog ended, answering late
      if (message === 'ready') {
        this.ready = true;
      } else {
        this.finish()?.resolve(message);
      }
      this.dispatch();
    });
    worker.on('error', (err: Error & { code?: string }) => {
      if (this.worker !== worker) return;
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') this.abort({ index: this.runningIndex(), code: 'COLLECTOR_TOO_LARGE', message: 'the mapping needs more memory than its worker has' });
      else {
        const batch = this.finish();
        this.retire();
        batch?.reject(err);
        this.dispatch();
      }
    });
    worker.on('exit', () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.finish()?.reject(new Error('the collector mapping worker exited'));
      if (!this.closed) this.dispatch();
    });
  }

  private retire(): void {
    const worker = this.worker;
    this.worker = undefined;
    this.ready = false;
    void worker?.terminate();
  }
}
