/**
 * Collectors: events pre-processed with a JSONata mapping (the `jsonata` package: the mapping language
 * of choice for JSON-to-JSON transforms, well kept). Mappings are checked here when declared or created
 * (syntax, and regular expressions the linear-time engine runs) and evaluated in a process of their
 * own that bounds their time, memory and output (mapping-worker.ts).
 *
 * A collector with `match: {type?, source?}` rewrites the CloudEvents posted to `/events` whose
 * attributes match, before validation and dedupe; one without `match` takes any JSON posted to
 * `/collectors/{name}/events` (a webhook body) and turns it into zero, one or many CloudEvents.
 *
 * Collectors made through the API live in the store (`col/<name>`), created and deleted with commitIf
 * and announced with a notice, so every process sharing the store serves the same ones.
 */
import { CollectorError, type CollectorFailure } from '../shared/errors.ts';
import { createHash } from 'node:crypto';
import jsonata from 'jsonata';
import type { Logger } from 'pino';
import { operatorRegexProblem, putIfAbsent, type Store } from '../../../src/pdk/index.ts';
import { MappingWorker, type MappingFailure, type MappingLimits } from './mapping-worker.ts';

export interface CollectorDefinition {
  name: string;
  description?: string | null;
  mapping: string;
  /** Absent: a webhook collector. */
  match?: { type?: string | null; source?: string | null } | null;
}

export interface CollectorRecord extends CollectorDefinition {
  origin: 'api' | 'config';
  created_at: string;
}

/**
 * A collector's name is a path segment of its webhook URL (`/collectors/{name}/events`), not a meter key:
 * lower-case letters and digits joined by single `-`, `_` or `.`, all of which a path segment holds
 * without percent-encoding (and never `.` or `..` alone, which URL normalisation would eat).
 */
const COLLECTOR_NAME_PATTERN = /^[a-z0-9]+(?:[-_.][a-z0-9]+)*$/;
const MAX_COLLECTOR_NAME_LENGTH = 64;

/** The largest mapping accepted: its compilation and its AST stay small. */
export const MAX_MAPPING_LENGTH = 16 * 1024;

/** A collector whose mapping mappingProblem found nothing wrong with. */
export interface CompiledCollector {
  record: CollectorRecord;
}

/**
 * A mapping's problem with its position in the text, or undefined. Its regular expression literals must
 * be ones RE2 runs (those a mapping builds at run time with `$eval` are refused when evaluated).
 */
export function mappingProblem(mapping: unknown): string | undefined {
  if (typeof mapping !== 'string' || mapping.trim() === '') return 'must be a non-empty JSONata expression';
  if (mapping.length > MAX_MAPPING_LENGTH) return `must be at most ${MAX_MAPPING_LENGTH} characters long`;
  let expression: jsonata.Expression;
  try {
    expression = jsonata(mapping);
  } catch (err) {
    const e = err as { message?: string; position?: number; code?: string };
    return `syntax error at position ${e.position ?? 0} (${e.code}): ${e.message}`;
  }
  for (const re of regexesOf(expression.ast())) {
    const problem = operatorRegexProblem(re.source, { anchored: false, ignoreCase: re.flags.includes('i') });
    // As written in the mapping: without the `g` JSONata adds.
    if (problem) return `the regular expression /${re.source}/${re.flags.replace('g', '')} is refused: ${problem}`;
  }
  return undefined;
}

/** Every regular expression literal in an AST (iterative: the AST of a long mapping may be deep). */
function regexesOf(ast: unknown): RegExp[] {
  const found: RegExp[] = [];
  const stack: unknown[] = [ast];
  const seen = new Set<unknown>();
  while (stack.length > 0) {
    const node = stack.pop();
    if (node instanceof RegExp) found.push(node);
    else if (typeof node === 'object' && node !== null && !seen.has(node)) {
      seen.add(node);
      for (const value of Object.values(node)) stack.push(value);
    }
  }
  return found;
}

/** Problems of a collector definition (API body or gateway.yaml entity), by field. */
export function collectorProblems(body: unknown): { field: string; reason: string }[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [{ field: '', reason: 'must be a JSON object' }];
  const b = body as Record<string, unknown>;
  const problems: { field: string; reason: string }[] = [];
  for (const key of Object.keys(b)) if (!['name', 'description', 'mapping', 'match'].includes(key)) problems.push({ field: key, reason: 'unknown property' });
  if (typeof b.name !== 'string' || !COLLECTOR_NAME_PATTERN.test(b.name) || b.name.length > MAX_COLLECTOR_NAME_LENGTH) {
    problems.push({ field: 'name', reason: `must be 1 to ${MAX_COLLECTOR_NAME_LENGTH} lower-case letters and digits, joined by single hyphens, underscores or dots` });
  }
  if (b.description !== undefined && b.description !== null && (typeof b.description !== 'string' || b.description.length > 1024)) problems.push({ field: 'description', reason: 'must be a string of at most 1024 characters' });
  const problem = mappingProblem(b.mapping);
  if (problem) problems.push({ field: 'mapping', reason: problem });
  const match = b.match;
  if (match !== undefined && match !== null) {
    if (typeof match !== 'object' || Array.isArray(match)) problems.push({ field: 'match', reason: 'must be an object with type and/or source' });
    else {
      const m = match as Record<string, unknown>;
      for (const key of Object.keys(m)) if (key !== 'type' && key !== 'source') problems.push({ field: `match.${key}`, reason: 'unknown property' });
      for (const key of ['type', 'source']) {
        const v = m[key];
        if (v !== undefined && v !== null && (typeof v !== 'string' || v.length === 0 || v.length > 256)) problems.push({ field: `match.${key}`, reason: 'must be a string of 1 to 256 characters' });
      }
    }
  }
  return problems;
}

const KEY_PREFIX = 'col/';
const TOPIC = 'collectors';

/** The mapping process's heap when the routes' bodies are small: room for JSONata, the input and its copies. */
const MIN_HEAP_MB = 128;
/** Heap per byte of the largest body a route takes (a parsed JSON body weighs several times its text). */
const HEAP_PER_BODY_BYTE = 16;

/** The limits mappings run under, from the metering routes' settings (the largest of each; without a route, the defaults). */
export function mappingLimits(configs: { collector_timeout_ms: number; max_body_size: number }[]): MappingLimits {
  const timeoutMs = configs.length > 0 ? Math.max(...configs.map((c) => c.collector_timeout_ms)) : 50;
  const largestBody = Math.max(0, ...configs.map((c) => c.max_body_size));
  return { timeoutMs, heapMb: Math.max(MIN_HEAP_MB, Math.ceil((largestBody * HEAP_PER_BODY_BYTE) / 2 ** 20)) };
}

/** The collectors of this configuration: declared ones and those created through the API, validated. */
export class Collectors {
  private compiled = new Map<string, CompiledCollector>();
  /** Collectors with a `match`, by name: the order in which they are tried. */
  private matchers: CompiledCollector[] = [];
  private declared: CollectorRecord[] = [];
  private stored: CollectorRecord[] = [];
  private readonly worker = new MappingWorker(mappingLimits([]));
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
  ) {
    // Another process created or deleted one (or notices were lost): read them again.
    this.unsubscribe = store.notices.subscribe(TOPIC, () => this.reload().catch((err) => log.error({ err }, 'metering: reloading collectors failed')));
  }

  async open(): Promise<void> {
    await this.reload();
  }

  close(): void {
    this.unsubscribe();
    this.worker.close();
  }

  /** A new configuration: its declared collectors and the limits their mappings run under. */
  configure(entities: Record<string, any>[], limits: MappingLimits): void {
    this.worker.configure(limits);
    this.declared = entities.map((e) => ({ name: e.name, description: e.description ?? null, mapping: e.mapping, match: e.match ?? null, origin: 'config', created_at: new Date(0).toISOString() }));
    this.rebuild();
  }

  private async reload(): Promise<void> {
    const stored: CollectorRecord[] = [];
    for await (const [, value] of this.store.scan({ prefix: KEY_PREFIX })) stored.push(JSON.parse(value));
    this.stored = stored;
    this.rebuild();
  }

  /** Validates what changed; a declared collector whose name an API one already has is ignored (and logged). */
  private rebuild(): void {
    const next = new Map<string, CompiledCollector>();
    const byName = new Map(this.stored.map((r) => [r.name, r]));
    for (const record of this.declared) {
      if (byName.has(record.name)) {
        this.log.error({ collector: record.name }, 'metering: a collector created through the API already uses this name; the gateway.yaml collector is ignored');
        continue;
      }
      byName.set(record.name, record);
    }
    for (const record of byName.values()) {
      const previous = this.compiled.get(record.name);
      // A collector stored by an older version may hold what this one refuses (a lookahead): it is left out.
      const problem = previous && previous.record.mapping === record.mapping ? undefined : mappingProblem(record.mapping);
      if (problem) this.log.error({ collector: record.name, problem }, 'metering: a stored collector\'s mapping is refused; the collector is left out');
      else next.set(record.name, { record });
    }
    this.compiled = next;
    if (next.size > 0) this.worker.warm();
    this.matchers = [...next.values()].filter((c) => c.record.match).sort((a, b) => (a.record.name < b.record.name ? -1 : 1));
  }

  list(): CollectorRecord[] {
    return [...this.compiled.values()].map((c) => c.record).sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  get(name: string): CompiledCollector | undefined {
    return this.compiled.get(name);
  }

  /** Stores a new collector; false when the name is taken (here or by another process meanwhile). */
  async create(definition: CollectorDefinition): Promise<CollectorRecord | undefined> {
    if (this.compiled.has(definition.name)) return undefined;
    const record: CollectorRecord = { name: definition.name, description: definition.description ?? null, mapping: definition.mapping, match: definition.match ?? null, origin: 'api', created_at: new Date().toISOString() };
    if (!(await putIfAbsent(this.store, KEY_PREFIX + definition.name, JSON.stringify(record)))) return undefined;
    await this.store.notices.publishAndWait(TOPIC, definition.name);
    return record;
  }

  /** Deletes an API collector; false when there was none. */
  async delete(name: string): Promise<boolean> {
    const key = KEY_PREFIX + name;
    const value = await this.store.get(key);
    if (value === undefined) return false;
    if (!(await this.store.commitIf([{ key, value }], [{ type: 'del', key }]))) return false;
    await this.store.notices.publishAndWait(TOPIC, name);
    return true;
  }

  /** The collector that applies to a posted CloudEvent: the first (by name) whose `match` holds. */
  matching(event: unknown): CompiledCollector | undefined {
    if (this.matchers.length === 0 || typeof event !== 'object' || event === null) return undefined;
    const { type, source } = event as Record<string, unknown>;
    for (const collector of this.matchers) {
      const match = collector.record.match!;
      if ((match.type == null || match.type === type) && (match.source == null || match.source === source)) return collector;
    }
    return undefined;
  }

  /**
   * Runs each job's collector over its input in the mapping process; per job, the events it yields (an object: one;
   * an array: each; nothing: none) with Tollgate's defaults filled in: `specversion` 1.0, `source`
   * `collector/<name>`, and an `id` hashed from the event itself, so that the same webhook delivered
   * twice is one event. `maxTotalBytes` bounds the events of all jobs together.
   */
  async run(jobs: { collector: CompiledCollector; input: unknown }[], maxTotalBytes: number): Promise<unknown[][]> {
    const { outputs, failure } = await this.worker.run(
      jobs.map(({ collector, input }) => ({ mapping: collector.record.mapping, input })),
      maxTotalBytes,
    );
    if (failure) throw collectorErrorOf(jobs[failure.index].collector.record.name, failure);
    return outputs.map((json, index) => {
      if (json === null) return [];
      const output: unknown = JSON.parse(json);
      const name = jobs[index].collector.record.name;
      return (Array.isArray(output) ? output : [output]).map((event, at) => withDefaults(name, event, at));
    });
  }
}

const FAILURES: Record<string, CollectorFailure> = {
  D1012: 'COLLECTOR_TIMEOUT',
  COLLECTOR_TOO_LARGE: 'COLLECTOR_TOO_LARGE',
  COLLECTOR_INVALID_RESULT: 'COLLECTOR_INVALID_RESULT',
};

function collectorErrorOf(collector: string, failure: MappingFailure): CollectorError {
  const known = failure.code === undefined ? undefined : FAILURES[failure.code];
  if (known === 'COLLECTOR_TIMEOUT') return new CollectorError(known, collector, 'the mapping ran past its time budget (collector_timeout_ms)');
  if (known) return new CollectorError(known, collector, failure.message);
  return new CollectorError('COLLECTOR_MAPPING_FAILED', collector, `the mapping failed${failure.code ? ` (${failure.code})` : ''}: ${failure.message}`);
}

function withDefaults(collector: string, event: unknown, index: number): unknown {
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    throw new CollectorError('COLLECTOR_INVALID_RESULT', collector, `the mapping yields ${Array.isArray(event) ? 'an array' : typeof event} at [${index}], not an event object`);
  }
  const out: Record<string, unknown> = { specversion: '1.0', source: `collector/${collector}`, ...(event as Record<string, unknown>) };
  out.id ??= createHash('sha256').update(JSON.stringify(out)).digest('base64url');
  return out;
}
