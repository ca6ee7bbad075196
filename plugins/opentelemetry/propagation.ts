/**
 * Kong's tracing header formats (kong/observability/tracing/propagation): each extractor reads a trace
 * context from the client's headers, each injector writes one into the upstream request. Ids are bytes,
 * trace ids held at 16 and span ids at 8 (shorter ones padded with zeros, as Kong's); an injector that
 * also takes 8-byte trace ids gives one back at the size it came in. Baggage is not carried.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { HeaderFormat, OpenTelemetryConfig } from './schema.ts';

export const TRACE_ID_BYTES = 16;
export const SPAN_ID_BYTES = 8;

/** A trace context, as extracted from headers or to be injected. */
export interface TraceContext {
  traceId?: Buffer;
  /** The trace id's size as it came in (8 or 16 bytes). */
  traceIdSize?: number;
  spanId?: Buffer;
  parentId?: Buffer;
  sampled?: boolean;
  /** B3's debug flag (`x-b3-flags: 1`, or `d` in the single header). */
  debug?: boolean;
  /** W3C trace flags as they came. */
  w3cFlags?: number;
  /** B3 came in its single-header form: `preserve` answers in that form. */
  b3Single?: boolean;
}

type Extractor = (headers: IncomingHttpHeaders) => TraceContext | undefined;

interface Injector {
  /** Trace id sizes the format carries; the first is used unless the context's own size is among them. */
  traceIdSizes: number[];
  /** The format needs a trace id and a span id. */
  needsIds: boolean;
  headers(ctx: TraceContext): Record<string, string>;
}

const HEX = /^[0-9a-f]+$/i;

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function fromHex(hex: string): Buffer {
  return Buffer.from(hex.length % 2 === 1 ? '0' + hex : hex, 'hex');
}

function isZero(hex: string): boolean {
  return /^0+$/.test(hex);
}

/** `1`/`true` → sampled, `0`/`false` → not, anything else → no decision. */
function flag(value: string | undefined): boolean | undefined {
  if (value === '1' || value === 'true') return true;
  if (value === '0' || value === 'false') return false;
  return undefined;
}

/** Kong's to_id_size: the last `size` bytes, or zeros in front. */
export function toIdSize(id: Buffer, size: number): Buffer {
  if (id.length > size) return id.subarray(id.length - size);
  if (id.length < size) return Buffer.concat([Buffer.alloc(size - id.length), id]);
  return id;
}

function w3c(headers: IncomingHttpHeaders): TraceContext | undefined {
  const match = /^([0-9a-f]+)-([0-9a-f]+)-([0-9a-f]+)-([0-9a-f]+)$/i.exec(header(headers, 'traceparent') ?? '');
  if (!match) return undefined;
  const [, version, traceId, parentId, flags] = match;
  if (version !== '00' || traceId.length !== 32 || isZero(traceId) || parentId.length !== 16 || isZero(parentId) || flags.length !== 2) return undefined;
  const w3cFlags = parseInt(flags, 16);
  return { traceId: fromHex(traceId), spanId: fromHex(parentId), sampled: w3cFlags % 2 === 1, w3cFlags };
}

const B3_SINGLE = /^([0-9a-f]+)-([0-9a-f]{16})-?([01d]?)-?([0-9a-f]*)$/i;

function b3SingleHeader(headers: IncomingHttpHeaders): string | undefined {
  const single = header(headers, 'b3');
  if (single !== undefined) return single;
  const state = headers.tracestate;
  for (const entry of Array.isArray(state) ? state : state ? [state] : []) {
    const found = /^b3=(.+)$/.exec(entry);
    if (found) return found[1];
  }
  return undefined;
}

function b3(headers: IncomingHttpHeaders): TraceContext | undefined {
  const names = ['b3', 'tracestate', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'x-b3-flags'];
  if (!names.some((n) => headers[n] !== undefined)) return undefined;
  const ctx: TraceContext = {};
  let ids: { trace?: string; span?: string; parent?: string } = {};
  const single = b3SingleHeader(headers);
  if (single !== undefined) {
    ctx.b3Single = true;
    if (single === '1' || single === 'd' || single === '0') {
      ctx.sampled = single !== '0';
      ctx.debug = single === 'd';
    } else {
      const m = B3_SINGLE.exec(single);
      if (m && (m[1].length === 16 || m[1].length === 32) && (m[4] === '' || m[4].length === 16)) {
        if (m[3] !== '') {
          ctx.sampled = m[3] !== '0';
          ctx.debug = m[3] === 'd';
        }
        ids = { trace: m[1], span: m[2], parent: m[4] || undefined };
      }
    }
  }
  // The multi-header form fills in what the single header left out.
  ctx.sampled ??= flag(header(headers, 'x-b3-sampled'));
  if (header(headers, 'x-b3-flags') === '1') {
    ctx.sampled = true;
    ctx.debug = true;
  }
  const trace = header(headers, 'x-b3-traceid');
  const span = header(headers, 'x-b3-spanid');
  const parent = header(headers, 'x-b3-parentspanid');
  const valid = (v: string | undefined, ...sizes: number[]) => v === undefined || (sizes.includes(v.length) && HEX.test(v));
  if (valid(trace, 16, 32) && valid(span, 16) && valid(parent, 16)) {
    ids = { trace: ids.trace ?? trace, span: ids.span ?? span, parent: ids.parent ?? parent };
  }
  if (ids.trace !== undefined) {
    ctx.traceId = fromHex(ids.trace);
    if (ids.span !== undefined) ctx.spanId = fromHex(ids.span);
    if (ids.parent !== undefined) ctx.parentId = fromHex(ids.parent);
  }
  return ctx;
}

function jaeger(headers: IncomingHttpHeaders): TraceContext | undefined {
  const m = /^([0-9a-f]+):([0-9a-f]+):([0-9a-f]+):([0-9a-f]+)$/i.exec(header(headers, 'uber-trace-id') ?? '');
  if (!m) return undefined;
  const [, traceId, spanId, parentId, flags] = m;
  if (traceId.length > 32 || isZero(traceId) || spanId.length > 16 || isZero(spanId) || (flags.length !== 1 && flags.length !== 2)) return undefined;
  return { traceId: fromHex(traceId), spanId: fromHex(spanId), parentId: fromHex(parentId), sampled: parseInt(flags, 16) % 2 === 1 };
}

function ot(headers: IncomingHttpHeaders): TraceContext | undefined {
  if (!['ot-tracer-sampled', 'ot-tracer-traceid', 'ot-tracer-spanid'].some((n) => headers[n] !== undefined)) return undefined;
  const ctx: TraceContext = { sampled: flag(header(headers, 'ot-tracer-sampled')) };
  const trace = header(headers, 'ot-tracer-traceid');
  const span = header(headers, 'ot-tracer-spanid');
  const traceValid = trace !== undefined && (trace.length === 16 || trace.length === 32) && HEX.test(trace);
  const spanValid = span === undefined || (span.length === 16 && HEX.test(span));
  if (traceValid && spanValid) {
    ctx.traceId = fromHex(trace);
    if (span !== undefined) ctx.spanId = fromHex(span);
  }
  return ctx;
}

function aws(headers: IncomingHttpHeaders): TraceContext | undefined {
  const value = header(headers, 'x-amzn-trace-id');
  if (value === undefined) return undefined;
  const ctx: TraceContext = {};
  for (const pair of value.split(';')) {
    const at = pair.indexOf('=');
    const key = (at < 0 ? pair : pair.slice(0, at)).trim();
    const v = at < 0 ? '' : pair.slice(at + 1).trim();
    if (key === 'Root') {
      const m = /^1-([0-9a-f]{8})-([0-9a-f]{24})$/i.exec(v);
      if (!m) return undefined;
      ctx.traceId = fromHex(m[1] + m[2]);
    } else if (key === 'Parent') {
      if (v.length !== 16 || !HEX.test(v)) return undefined;
      ctx.spanId = fromHex(v);
    } else if (key === 'Sampled') {
      if (v !== '0' && v !== '1') return undefined;
      ctx.sampled = v === '1';
    }
  }
  return ctx;
}

function gcp(headers: IncomingHttpHeaders): TraceContext | undefined {
  const m = /^([0-9a-f]{32})\/([0-9]{1,20})(?:;o=([0-9]))?$/.exec(header(headers, 'x-cloud-trace-context') ?? '');
  if (!m) return undefined;
  const spanId = Buffer.alloc(8);
  spanId.writeBigUInt64BE(BigInt(m[2]) & 0xffffffffffffffffn);
  return { traceId: fromHex(m[1]), spanId, sampled: m[3] === '1' };
}

const EXTRACTORS: Partial<Record<HeaderFormat, Extractor>> = { w3c, b3, jaeger, ot, aws, gcp };

const hex = (id: Buffer | undefined) => id?.toString('hex');

const INJECTORS: Partial<Record<HeaderFormat, Injector>> = {
  w3c: { traceIdSizes: [16], needsIds: true, headers: (c) => ({ traceparent: `00-${hex(c.traceId)}-${hex(c.spanId)}-${c.sampled ? '01' : '00'}` }) },
  b3: {
    traceIdSizes: [16, 8],
    needsIds: false,
    headers(c) {
      const out: Record<string, string> = {};
      if (c.traceId && c.spanId) {
        out['x-b3-traceid'] = hex(c.traceId)!;
        out['x-b3-spanid'] = hex(c.spanId)!;
        if (c.parentId) out['x-b3-parentspanid'] = hex(c.parentId)!;
      }
      if (c.debug) out['x-b3-flags'] = '1';
      else out['x-b3-sampled'] = c.sampled ? '1' : '0';
      return out;
    },
  },
  'b3-single': {
    traceIdSizes: [16, 8],
    needsIds: false,
    headers(c) {
      const sampled = c.debug ? 'd' : c.sampled === undefined ? undefined : c.sampled ? '1' : '0';
      if (!c.traceId || !c.spanId) return { b3: sampled ?? '0' };
      return { b3: [hex(c.traceId), hex(c.spanId), sampled, hex(c.parentId)].filter((p) => p !== undefined).join('-') };
    },
  },
  jaeger: {
    traceIdSizes: [16, 8],
    needsIds: true,
    headers: (c) => ({ 'uber-trace-id': `${hex(c.traceId)}:${hex(c.spanId)}:${hex(c.parentId) ?? '0'}:${c.sampled ? '01' : '00'}` }),
  },
  ot: {
    traceIdSizes: [8, 16],
    needsIds: true,
    headers(c) {
      const out: Record<string, string> = { 'ot-tracer-traceid': hex(c.traceId)!, 'ot-tracer-spanid': hex(c.spanId)! };
      if (c.sampled !== undefined) out['ot-tracer-sampled'] = c.sampled ? '1' : '0';
      return out;
    },
  },
  aws: {
    traceIdSizes: [16],
    needsIds: true,
    headers(c) {
      const trace = hex(c.traceId)!;
      return { 'x-amzn-trace-id': `Root=1-${trace.slice(0, 8)}-${trace.slice(8)};Parent=${hex(c.spanId)};Sampled=${c.sampled ? '1' : '0'}` };
    },
  },
  gcp: {
    traceIdSizes: [16],
    needsIds: true,
    headers: (c) => ({ 'x-cloud-trace-context': `${hex(c.traceId)}/${c.spanId!.readBigUInt64BE()};o=${c.sampled ? '1' : '0'}` }),
  },
};

/** What to read, write and remove (Kong's get_plugin_params): `propagation` unless only its default_format is set, else `header_type`. */
export interface Propagation {
  extract: readonly HeaderFormat[];
  inject: readonly (HeaderFormat | 'preserve')[];
  clear: readonly string[];
  defaultFormat: HeaderFormat;
}

const ALL_EXTRACTED: HeaderFormat[] = ['b3', 'w3c', 'jaeger', 'ot', 'aws', 'gcp'];

export function propagationOf(config: OpenTelemetryConfig): Propagation {
  const p = config.propagation;
  const defaultFormat = p.default_format;
  if (p.extract?.length || p.inject?.length || p.clear?.length) {
    return { extract: p.extract ?? [], inject: p.inject ?? [], clear: p.clear ?? [], defaultFormat };
  }
  switch (config.header_type) {
    case 'preserve':
      return { extract: ALL_EXTRACTED, inject: ['preserve'], clear: [], defaultFormat };
    case 'ignore':
      return { extract: [], inject: [defaultFormat], clear: [], defaultFormat };
    default:
      return { extract: ALL_EXTRACTED, inject: ['preserve', config.header_type], clear: [], defaultFormat };
  }
}

/** The first format among `formats` whose headers are present, with what it carries. */
export function extract(formats: readonly HeaderFormat[], headers: IncomingHttpHeaders): { format: HeaderFormat; context: TraceContext } | undefined {
  for (const format of formats) {
    const context = EXTRACTORS[format]?.(headers);
    if (!context) continue;
    if (context.traceId) {
      context.traceIdSize = context.traceId.length;
      context.traceId = toIdSize(context.traceId, TRACE_ID_BYTES);
    }
    if (context.spanId) context.spanId = toIdSize(context.spanId, SPAN_ID_BYTES);
    if (context.parentId) context.parentId = toIdSize(context.parentId, SPAN_ID_BYTES);
    return { format, context };
  }
  return undefined;
}

/**
 * The headers of `format` for `ctx`, and the trace id as that format writes it (what Kong adds to the log
 * entry's `trace_id`, under the format's name: b3-single's under `b3`); undefined when the format needs ids
 * the context lacks.
 */
export function inject(format: HeaderFormat, ctx: TraceContext): { headers: Record<string, string>; traceId: [string, string] } | undefined {
  const injector = INJECTORS[format];
  if (!injector || (injector.needsIds && (!ctx.traceId || !ctx.spanId))) return undefined;
  const size = injector.traceIdSizes.includes(ctx.traceIdSize ?? 0) ? ctx.traceIdSize! : injector.traceIdSizes[0];
  const traceId = ctx.traceId && toIdSize(ctx.traceId, size);
  return { headers: injector.headers({ ...ctx, traceId }), traceId: [format === 'b3-single' ? 'b3' : format, hex(traceId) ?? ''] };
}

/** The formats `preserve` stands for here: the one the context came in, else the default. */
export function resolveInjected(p: Propagation, extractedFrom: HeaderFormat | undefined, b3Single: boolean): HeaderFormat[] {
  return p.inject.map((f) => {
    if (f !== 'preserve') return f;
    const format = extractedFrom ?? p.defaultFormat;
    return format === 'b3' && b3Single ? 'b3-single' : format;
  });
}
