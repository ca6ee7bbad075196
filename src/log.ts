/**
 * Structured logs (pino), one format per run: JSON lines (ISO 8601 `time`, level names) when stdout
 * is a pipe or a file, for log collectors; pino-pretty's readable lines when it is a terminal. Every
 * logger of the process and the access log write through one stdout writer, so lines never mix.
 */
import pino, { type Logger } from 'pino';
import pinoPretty from 'pino-pretty';

export type { Logger };

export type LogFormat = 'json' | 'pretty';

export function logFormatOf(stdout: { isTTY?: boolean }): LogFormat {
  return stdout.isTTY ? 'pretty' : 'json';
}

interface Sink {
  write(chunk: string): unknown;
  flushSync?(): void;
}

let stdoutSink: Sink | undefined;

/** Fields of the access log the pretty form shows in its one-line message instead of below it. */
const ACCESS_FIELDS = [
  'type', 'method', 'path', 'status', 'route', 'service', 'consumer', 'credential', 'client_ip', 'user_agent',
  'latency_ms', 'upstream_latency_ms', 'request_body_bytes', 'response_body_bytes',
];

function prettyMessage(line: Record<string, unknown>, messageKey: string): string {
  if (line.type !== 'access') return String(line[messageKey] ?? '');
  const who = line.consumer ? ` consumer=${line.consumer}` : '';
  return `${line.method} ${line.path} ${line.status} ${line.latency_ms}ms route=${line.route || '-'}${who} ` +
    `in=${line.request_body_bytes}B out=${line.response_body_bytes}B ${line.client_ip}`;
}

/** The process's one writer to stdout, in the run's format. */
function sink(): Sink {
  if (stdoutSink) return stdoutSink;
  if (logFormatOf(process.stdout) === 'pretty') {
    // Synchronous: a human watching a terminal sees each line at once, and none is lost at exit.
    stdoutSink = pinoPretty({
      destination: 1,
      sync: true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: ['pid', 'hostname', ...ACCESS_FIELDS].join(','),
      messageFormat: prettyMessage,
    });
  } else {
    // Asynchronous writes keep logging off the request path; lines written while one write is in
    // flight go out together with the next. pino flushes it when the process exits.
    stdoutSink = pino.destination({ sync: false, minLength: 0 });
  }
  return stdoutSink;
}

/** A logger on stdout at `level`, in the run's format. */
export function createLogger(level: string): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    sink() as pino.DestinationStream,
  );
}

/** Writes out whatever the loggers hold (before `process.exit`). */
export function flushLogs(): void {
  stdoutSink?.flushSync?.();
}

export interface Logging {
  log: Logger;
  access: AccessLog;
}

export function createLogging(level: string): Logging {
  const log = createLogger(level);
  return { log, access: new AccessLog(sink(), log) };
}

export interface AccessEntry {
  request_id: string;
  method: string;
  path: string;
  status: number;
  route: string;
  service: string;
  /** The authenticated consumer's username (its id when it has none); absent when none. */
  consumer: string | undefined;
  /** The id of the credential that authenticated the request; absent when none. */
  credential: string | undefined;
  client_ip: string;
  user_agent: string | undefined;
  latency_ms: number;
  upstream_latency_ms: number | undefined;
  /** Request body bytes the gateway received. */
  request_body_bytes: number;
  /** Response body bytes the gateway sent (the frames of a WebSocket tunnel, both ways, count too). */
  response_body_bytes: number;
  /** Values plugins add to the request's line (Kong's kong.log.set_serialize_value). */
  fields?: Record<string, unknown>;
}

/** Names of the line's own fields: a plugin's value of the same name is left out, never written twice. */
const OWN_FIELDS = new Set([
  'level', 'time', 'pid', 'type', 'request_id', 'method', 'path', 'status', 'route', 'service', 'consumer', 'credential', 'client_ip',
  'user_agent', 'latency_ms', 'upstream_latency_ms', 'request_body_bytes', 'response_body_bytes', 'msg',
]);

/** Flushed at least this often, so that a quiet gateway's lines show up at once to a human eye. */
const FLUSH_AFTER_MS = 100;
/** Flushed earlier once this many characters wait: a busy gateway writes in large chunks. */
const FLUSH_AT_CHARS = 64 * 1024;

/** What JSON must escape in a string (lone surrogates included, as JSON.stringify does). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A JSON string: most values (names, paths, user agents) need no escape, and skip JSON.stringify's cost. */
function quoted(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
}

function optional(name: string, value: string | number | undefined): string {
  if (value === undefined) return '';
  return `,"${name}":${typeof value === 'number' ? value : quoted(value)}`;
}

/**
 * The access log: pino's line shape (level, time, pid, …, msg) built by hand and written in batches.
 * Measured: pino's generic serializer plus one write per 4 KB cost ~15 µs of CPU per proxied request,
 * the largest single item of the core's per-request work; this costs ~2.
 */
export class AccessLog {
  enabled = true;
  private buffer = '';
  private timer: NodeJS.Timeout | undefined;
  private readonly prefix = `{"level":"info","time":"`;
  private timeMs = 0;
  private timeText = '';
  private readonly pid = `","pid":${process.pid},"type":"access"`;

  constructor(
    private readonly destination: { write(chunk: string): unknown },
    /** The access log is written at level info: it follows the logger's level. */
    private readonly log: Logger,
  ) {}

  write(e: AccessEntry): void {
    if (!this.enabled || !this.log.isLevelEnabled('info')) return;
    this.buffer +=
      this.prefix + this.isoTime() + this.pid +
      `,"request_id":"${e.request_id}"` +
      `,"method":${quoted(e.method)},"path":${quoted(e.path)},"status":${e.status}` +
      `,"route":${quoted(e.route)},"service":${quoted(e.service)}` +
      optional('consumer', e.consumer) + optional('credential', e.credential) +
      `,"client_ip":${quoted(e.client_ip)}` + optional('user_agent', e.user_agent) +
      `,"latency_ms":${e.latency_ms}` + optional('upstream_latency_ms', e.upstream_latency_ms) +
      `,"request_body_bytes":${e.request_body_bytes},"response_body_bytes":${e.response_body_bytes}` +
      (e.fields ? pluginFields(e.fields) : '') +
      `,"msg":"request"}\n`;
    if (this.buffer.length >= FLUSH_AT_CHARS) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), FLUSH_AFTER_MS).unref();
  }

  /** Formatting a date costs more than the rest of the line: once per millisecond, however many requests share it. */
  private isoTime(): string {
    const now = Date.now();
    if (now !== this.timeMs) {
      this.timeMs = now;
      this.timeText = new Date(now).toISOString();
    }
    return this.timeText;
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.buffer) return;
    this.destination.write(this.buffer);
    this.buffer = '';
  }
}

function pluginFields(fields: Record<string, unknown>): string {
  let out = '';
  for (const [name, value] of Object.entries(fields)) if (!OWN_FIELDS.has(name)) out += `,${JSON.stringify(name)}:${JSON.stringify(value)}`;
  return out;
}
