/**
 * Ingest request bodies: content types, CloudEvents 1.0 validation (every problem of every event,
 * OpenMeter v3's sealed `MeteringEvent`), and the record each valid event is stored as.
 */
import { BodyError, invalidEvents, malformedJson, notUtf8, type InvalidParameter } from '../shared/errors.ts';
import { isUtf8 } from 'node:buffer';
import { mediaType, parseUntrustedJson } from '../../../src/pdk/index.ts';
import { nestedDeeperThan } from '../shared/json-depth.ts';
import { dedupeHash, escapePart } from '../shared/keys.ts';
import { MAX_IDENTIFIER_LENGTH } from '../shared/limits.ts';
import { formatUtc, parseRfc3339 } from '../shared/time.ts';
import { readingProblems, type CompiledMeter } from '../meter/port.ts';
import type { PreparedEvent, StoredEvent } from '../shared/events.ts';

type BodyShape = 'one' | 'batch' | 'either';

const CONTENT_TYPES: Record<string, BodyShape> = {
  'application/cloudevents+json': 'one',
  'application/cloudevents-batch+json': 'batch',
  'application/json': 'either',
};

/** Deeper `data` is refused: it could not be stored or read back without exhausting the stack. */
export const MAX_DATA_DEPTH = 64;

const REQUIRED_STRINGS = ['id', 'source', 'type', 'subject'];
const KNOWN_ATTRIBUTES = new Set(['specversion', 'id', 'source', 'type', 'subject', 'time', 'datacontenttype', 'dataschema', 'data']);
const MIN_TIME = 1;

/**
 * A JSON escape of a surrogate (`\ud800`): the only way a lone one gets into a valid UTF-8 body.
 * Matches escaped backslashes too (`\\ud800`), so it only says where to look closer.
 */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

export interface DecodedEvents {
  events: unknown[];
  batch: boolean;
  /** The body escapes a surrogate somewhere: its strings must be checked for lone ones. */
  mayHoldLoneSurrogates: boolean;
}

/** The events of a body; throws BodyError for a bad content type, a body that is not UTF-8, or malformed JSON. */
export function decodeEvents(contentType: string | undefined, body: Buffer): DecodedEvents {
  const type = mediaType(contentType);
  const shape = CONTENT_TYPES[type];
  if (!shape) throw new BodyError('METERING_ERR_CONTENT_TYPE', `invalid content type: ${type || '(none)'}`);
  // Decoding would turn every invalid sequence into U+FFFD: two different ids would read as one.
  if (!isUtf8(body)) throw notUtf8('invalid event: ');
  const text = body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = parseUntrustedJson(text);
  } catch (err) {
    throw malformedJson(err as Error, `malformed JSON: ${(err as Error).message}`, 'invalid event: ');
  }
  const mayHoldLoneSurrogates = SURROGATE_ESCAPE.test(text);
  if (shape === 'batch' || (shape === 'either' && Array.isArray(parsed))) {
    if (!Array.isArray(parsed)) {
      throw new BodyError('METERING_ERR_MALFORMED_BODY', 'invalid event: a batch must be a JSON array', { invalidParameters: [{ field: 'body', reason: 'must be an array of events', rule: 'type', source: 'body' }] });
    }
    if (shape === 'either' && parsed.length === 0) {
      throw new BodyError('METERING_ERR_MALFORMED_BODY', 'invalid event: no events found', { invalidParameters: [{ field: 'body', reason: 'no events found', rule: 'min_items', source: 'body' }] });
    }
    return { events: parsed, batch: true, mayHoldLoneSurrogates };
  }
  return { events: [parsed], batch: false, mayHoldLoneSurrogates };
}

/** Where the problems of one event go (reused across the events of a request). */
interface Report {
  index: number;
  batch: boolean;
  problems: InvalidParameter[];
}

function addProblem(r: Report, field: string, reason: string, rule: string): void {
  const prefix = r.batch ? `[${r.index}]` : '';
  const path = field ? (prefix ? `${prefix}.${field}` : field) : prefix || 'body';
  r.problems.push({ field: path, index: r.index, reason, rule, source: 'body' });
}

function requiredString(event: Record<string, unknown>, name: string, r: Report): void {
  const v = event[name];
  if (v === undefined || v === null) addProblem(r, name, 'required property is missing', 'required');
  else if (typeof v !== 'string') addProblem(r, name, 'must be a string', 'is_string');
  else if (v.length === 0) addProblem(r, name, 'must not be empty', 'min_length');
  else if (v.length > MAX_IDENTIFIER_LENGTH) addProblem(r, name, `must be at most ${MAX_IDENTIFIER_LENGTH} characters long`, 'max_length');
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one (String#isWellFormed, ES2024). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * The path of the first string (or object key) in `value` holding a lone surrogate, or undefined.
 * Such text has no UTF-8 form: hashing or storing it would turn it into U+FFFD, so that "\ud800"
 * and "\udbff" would name the same event. Iterative: safe on deep input.
 */
function loneSurrogateAt(value: unknown, path: string): string | undefined {
  const stack: [unknown, string][] = [[value, path]];
  while (stack.length > 0) {
    const [v, at] = stack.pop()!;
    if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return at;
    } else if (Array.isArray(v)) {
      v.forEach((child, i) => stack.push([child, `${at}[${i}]`]));
    } else if (typeof v === 'object' && v !== null) {
      for (const [key, child] of Object.entries(v)) {
        if (LONE_SURROGATE.test(key)) return at;
        stack.push([child, `${at}.${key}`]);
      }
    }
  }
  return undefined;
}

/** What Go's URL parser refuses: control characters, spaces, malformed percent escapes. */
const NOT_URI_REFERENCE = /[\x00-\x20\x7f]|%(?![0-9A-Fa-f]{2})/;

function isUriReference(text: string): boolean {
  return !NOT_URI_REFERENCE.test(text);
}

export interface ValidationContext {
  /** Receive time, ms. */
  now: number;
  /** Oldest acceptable event time, seconds. */
  retentionStart: number;
  retentionDays: number;
  /** The meters that will aggregate events of a type (their limits are checked at ingest). */
  metersOf?: (type: string) => readonly CompiledMeter[];
  /** Check strings for lone surrogates (see DecodedEvents). */
  mayHoldLoneSurrogates?: boolean;
}

/** How far ahead of its receive time an event may be dated: clock skew and scheduled usage, not year 9999. */
export const MAX_FUTURE_DAYS = 365;

/** Validates one event, reporting its problems; the record to store when it has none. */
function checkEvent(raw: unknown, ctx: ValidationContext, r: Report): StoredEvent | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    addProblem(r, '', 'an event must be a JSON object', 'type');
    return undefined;
  }
  const event = raw as Record<string, unknown>;
  const before = r.problems.length;
  for (const key in event) if (!KNOWN_ATTRIBUTES.has(key)) addProblem(r, key, 'unknown property', 'unknown_property');
  if (event.specversion === undefined || event.specversion === null) addProblem(r, 'specversion', 'required property is missing', 'required');
  else if (event.specversion !== '1.0') addProblem(r, 'specversion', `unknown value: ${JSON.stringify(event.specversion)} (only "1.0" is supported)`, 'enum');
  for (const name of REQUIRED_STRINGS) requiredString(event, name, r);
  if (typeof event.source === 'string' && event.source && !isUriReference(event.source)) addProblem(r, 'source', 'cannot parse uri ref', 'format');
  let time = Math.floor(ctx.now / 1000);
  if (event.time !== undefined && event.time !== null) {
    const parsed = typeof event.time === 'string' ? parseRfc3339(event.time) : undefined;
    const latest = time + MAX_FUTURE_DAYS * 86_400;
    if (parsed === undefined) addProblem(r, 'time', 'must be an RFC 3339 date-time with a time zone offset', 'is_date_time');
    else if (parsed < MIN_TIME) addProblem(r, 'time', 'must be after 1970-01-01T00:00:00Z', 'minimum');
    else if (parsed < ctx.retentionStart) addProblem(r, 'time', `event time is outside the retention period of ${ctx.retentionDays} days`, 'retention');
    else if (parsed > latest) addProblem(r, 'time', `must be at most ${MAX_FUTURE_DAYS} days after the time it is received (${formatUtc(latest)})`, 'maximum');
    else time = parsed;
  }
  if (event.datacontenttype !== undefined && event.datacontenttype !== null && event.datacontenttype !== 'application/json') {
    addProblem(r, 'datacontenttype', 'only application/json is supported', 'enum');
  }
  const schema = event.dataschema;
  if (schema !== undefined && schema !== null && (typeof schema !== 'string' || schema.length === 0 || !isUriReference(schema))) {
    addProblem(r, 'dataschema', 'must be a non-empty URI', 'format');
  }
  const data = event.data;
  if (data !== undefined && data !== null && (typeof data !== 'object' || Array.isArray(data))) addProblem(r, 'data', 'must be a JSON object or null', 'type');
  else if (nestedDeeperThan(data, MAX_DATA_DEPTH)) addProblem(r, 'data', `must not nest more than ${MAX_DATA_DEPTH} levels`, 'max_depth');
  if (ctx.mayHoldLoneSurrogates) {
    const at = loneSurrogateAt(event, '');
    if (at !== undefined) addProblem(r, at.slice(1), 'holds a lone UTF-16 surrogate, which has no UTF-8 form', 'encoding');
  }
  if (r.problems.length > before) return undefined;
  for (const meter of ctx.metersOf?.(event.type as string) ?? []) readingProblems(meter, data, (field, reason, rule) => addProblem(r, field, reason, rule));
  if (r.problems.length > before) return undefined;
  const record: StoredEvent = {
    id: event.id as string,
    source: event.source as string,
    type: event.type as string,
    subject: event.subject as string,
    time,
    ingested_at: ctx.now,
  };
  if (typeof event.datacontenttype === 'string') record.datacontenttype = event.datacontenttype;
  if (typeof schema === 'string') record.dataschema = schema;
  if (data !== undefined) record.data = data as Record<string, unknown> | null;
  return record;
}

/** Characters a JSON string must escape, and lone surrogates (JSON.stringify escapes those too). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/**
 * JSON.stringify(record), written out: one JSON.stringify call per event costs ~1 µs of setup alone,
 * more than the rest of the record (this runs for every ingested event).
 */
export function storedEventJson(record: StoredEvent): string {
  let json = `{"id":${jsonString(record.id)},"source":${jsonString(record.source)},"type":${jsonString(record.type)},"subject":${jsonString(record.subject)},"time":${record.time}`;
  if (record.datacontenttype !== undefined) json += `,"datacontenttype":${jsonString(record.datacontenttype)}`;
  if (record.dataschema !== undefined) json += `,"dataschema":${jsonString(record.dataschema)}`;
  if (record.data !== undefined) json += `,"data":${JSON.stringify(record.data)}`;
  return json + `,"ingested_at":${record.ingested_at}}`;
}

/** Validates every event; throws BodyError listing every problem, else returns the prepared events. */
export function prepareEvents(events: unknown[], batch: boolean, ctx: ValidationContext): PreparedEvent[] {
  const report: Report = { index: 0, batch, problems: [] };
  const prepared: PreparedEvent[] = [];
  for (let index = 0; index < events.length; index++) {
    report.index = index;
    const record = checkEvent(events[index], ctx, report);
    if (record && report.problems.length === 0) {
      prepared.push({ record, json: storedEventJson(record), typeEscaped: escapePart(record.type), dedupe: dedupeHash(record.source, record.id) });
    }
  }
  const problems = report.problems;
  if (problems.length > 0) throw invalidEvents(problems, events.length);
  return prepared;
}
