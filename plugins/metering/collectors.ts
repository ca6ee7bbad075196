/**
 * Collectors: events pre-processed with a JSONata mapping (the `jsonata` package: the mapping language
 * of choice for JSON-to-JSON transforms, well kept, with evaluation guardrails of its own: a time budget,
 * a depth limit and a sequence-size limit checked at every evaluation step).
 *
 * A collector with `match: {type?, source?}` rewrites the CloudEvents posted to `/events` whose
 * attributes match, before validation and dedupe; one without `match` takes any JSON posted to
 * `/collectors/{name}/events` (a webhook body) and turns it into zero, one or many CloudEvents.
 * Mappings are compiled once per configuration (declared ones) or once per creation (API ones).
 *
 * Collectors made through the API live in the store (`col/<name>`), created and deleted with commitIf
 * and announced with a notice, so every process sharing the store serves the same ones.
 */
import { CollectorError } from './errors.ts';
import { createHash } from 'node:crypto';
import jsonata from 'jsonata';
import type { Logger } from 'pino';
import { compileRouteRegex, putIfAbsent, type Store } from '../../src/pipeline/plugin-api.ts';
import { KEY_PATTERN } from './meter-model.ts';

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

/** The largest mapping accepted: its compilation and its AST stay small. */
export const MAX_MAPPING_LENGTH = 16 * 1024;
/** Evaluation guardrails besides the time budget: nesting depth and sequence size. */
const MAX_DEPTH = 200;
const MAX_SEQUENCE = 100_000;
/** Most events one webhook body may turn into. */
export const MAX_EVENTS_PER_WEBHOOK = 10_000;

/** Why a pattern is refused, by pattern (bounded: mappings build patterns at run time with `$eval`). */
const refusals = new Map<string, string | null>();

/**
 * The regular expression engine mappings run with: patterns that can backtrack catastrophically (the
 * check route regexes get: nested unbounded repetitions) are refused, also those built at run time
 * through `$eval`.
 */
class SafeRegExp extends RegExp {
  constructor(pattern: string | RegExp, flags?: string) {
    const source = typeof pattern === 'string' ? pattern : pattern.source;
    const refused = refusalOf(source);
    if (refused) throw { code: 'TG0001', message: `the regular expression /${source}/ is refused: ${refused}` };
    super(pattern, flags);
  }
}

function refusalOf(source: string): string | null {
  let refused = refusals.get(source);
  if (refused === undefined) {
    const compiled = compileRouteRegex(source, { anchored: false, ignoreCase: false });
    refused = typeof compiled === 'string' ? compiled : null;
    if (refusals.size > 1000) refusals.clear();
    refusals.set(source, refused);
  }
  return refused;
}

export interface CompiledCollector {
  record: CollectorRecord;
  expression: jsonata.Expression;
}

/** A mapping compiled with the guardrails, or the problem with its position in the text. */
export function compileMapping(mapping: unknown, timeoutMs: number): { expression?: jsonata.Expression; problem?: string } {
  if (typeof mapping !== 'string' || mapping.trim() === '') return { problem: 'must be a non-empty JSONata expression' };
  if (mapping.length > MAX_MAPPING_LENGTH) return { problem: `must be at most ${MAX_MAPPING_LENGTH} characters long` };
  let expression: jsonata.Expression;
  try {
    expression = jsonata(mapping, { timeout: timeoutMs, stack: MAX_DEPTH, sequence: MAX_SEQUENCE, RegexEngine: SafeRegExp as unknown as RegExpConstructor });
  } catch (err) {
    const e = err as { message?: string; position?: number; code?: string };
    return { problem: `syntax error at position ${e.position ?? 0} (${e.code}): ${e.message}` };
  }
  for (const re of regexesOf(expression.ast())) {
    const refused = refusalOf(re.source);
    if (refused) return { problem: `the regular expression ${re} is refused: ${refused}` };
  }
  return { expression };
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
export function collectorProblems(body: unknown, timeoutMs: number): { field: string; reason: string }[] {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [{ field: '', reason: 'must be a JSON object' }];
  const b = body as Record<string, unknown>;
  const problems: { field: string; reason: string }[] = [];
  for (const key of Object.keys(b)) if (!['name', 'description', 'mapping', 'match'].includes(key)) problems.push({ field: key, reason: 'unknown property' });
  if (typeof b.name !== 'string' || !KEY_PATTERN.test(b.name) || b.name.length > 64) problems.push({ field: 'name', reason: 'must be 1 to 64 lower-case letters, digits and single underscores (as meter keys)' });
  if (b.description !== undefined && b.description !== null && (typeof b.description !== 'string' || b.description.length > 1024)) problems.push({ field: 'description', reason: 'must be a string of at most 1024 characters' });
  const { problem } = compileMapping(b.mapping, timeoutMs);
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

/** The collectors of this configuration: declared ones and those created through the API, compiled. */
export class Collectors {
  private compiled = new Map<string, CompiledCollector>();
  /** Collectors with a `match`, by name: the order in which they are tried. */
  private matchers: CompiledCollector[] = [];
  /** The time budget the compiled expressions carry. */
  private compiledTimeout = 0;
  private declared: CollectorRecord[] = [];
  private stored: CollectorRecord[] = [];
  timeoutMs = 50;
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
  }

  /** A new configuration: its declared collectors and its time budget. */
  configure(entities: Record<string, any>[], timeoutMs: number): void {
    this.timeoutMs = timeoutMs;
    this.declared = entities.map((e) => ({ name: e.name, description: e.description ?? null, mapping: e.mapping, match: e.match ?? null, origin: 'config', created_at: new Date(0).toISOString() }));
    this.rebuild();
  }

  private async reload(): Promise<void> {
    const stored: CollectorRecord[] = [];
    for await (const [, value] of this.store.scan({ prefix: KEY_PREFIX })) stored.push(JSON.parse(value));
    this.stored = stored;
    this.rebuild();
  }

  /** Compiles what changed; a declared collector whose name an API one already has is ignored (and logged). */
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
      if (previous && previous.record.mapping === record.mapping && previous.expression && this.timeoutMs === this.compiledTimeout) {
        next.set(record.name, { ...previous, record });
        continue;
      }
      const { expression } = compileMapping(record.mapping, this.timeoutMs);
      if (expression) next.set(record.name, { record, expression });
    }
    this.compiled = next;
    this.compiledTimeout = this.timeoutMs;
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
}

/** How long evaluations may run back to back before the event loop gets a turn (other requests go on meanwhile). */
const YIELD_EVERY_MS = 10;

/**
 * Runs a collector's mapping over `input`; the events it yields (an object: one; an array: each; nothing:
 * none), with Tollgate's defaults filled in: `specversion` 1.0, `source` `collector/<name>`, and an `id`
 * hashed from the event itself, so that the same webhook delivered twice is one event.
 */
export async function runMapping(collector: CompiledCollector, input: unknown, clock: { since: number }): Promise<unknown[]> {
  if (performance.now() - clock.since > YIELD_EVERY_MS) {
    await new Promise((resolve) => setImmediate(resolve));
    clock.since = performance.now();
  }
  const name = collector.record.name;
  let output: unknown;
  try {
    output = await collector.expression.evaluate(input);
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e.code === 'D1012') throw new CollectorError('COLLECTOR_TIMEOUT', name, 'the mapping ran past its time budget (collector_timeout_ms)');
    throw new CollectorError('COLLECTOR_MAPPING_FAILED', name, `the mapping failed${e.code ? ` (${e.code})` : ''}: ${e.message ?? String(err)}`);
  }
  if (output === undefined) return [];
  const events = Array.isArray(output) ? [...output] : [output];
  if (events.length > MAX_EVENTS_PER_WEBHOOK) throw new CollectorError('COLLECTOR_INVALID_RESULT', name, `the mapping yields ${events.length} events, more than ${MAX_EVENTS_PER_WEBHOOK}`);
  return events.map((event, index) => withDefaults(name, event, index));
}

function withDefaults(collector: string, event: unknown, index: number): unknown {
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    throw new CollectorError('COLLECTOR_INVALID_RESULT', collector, `the mapping yields ${Array.isArray(event) ? 'an array' : typeof event} at [${index}], not an event object`);
  }
  const out: Record<string, unknown> = { specversion: '1.0', source: `collector/${collector}`, ...(event as Record<string, unknown>) };
  out.id ??= createHash('sha256').update(JSON.stringify(out)).digest('base64url');
  return out;
}
