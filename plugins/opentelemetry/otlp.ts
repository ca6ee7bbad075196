/**
 * OTLP/HTTP's protobuf body for traces (opentelemetry-proto's ExportTraceServiceRequest, the messages
 * Kong's kong/observability/otlp encodes), written by hand: the handful of messages and wire types it
 * needs are a few lines each, where a protobuf library would add a runtime dependency and the .proto files.
 */

/** Kong's span kinds (OTLP SpanKind). */
export const SPAN_KIND = { server: 2, client: 3 } as const;
/** OTLP's status code for an error. */
export const STATUS_ERROR = 2;

export type AttributeValue = string | number | boolean;

export interface Span {
  traceId: Buffer;
  spanId: Buffer;
  parentSpanId?: Buffer;
  name: string;
  kind: number;
  startTimeNs: bigint;
  endTimeNs: bigint;
  attributes: Record<string, AttributeValue>;
  /** Set only on failure, as Kong's spans. */
  statusCode?: number;
}

/** Kong sends http.status_code as an integer and every other number as a double. */
const INTEGER_ATTRIBUTES = new Set(['http.status_code']);

/** Protobuf wire types. */
const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;

/** One message being written: its fields in order. */
class MessageWriter {
  private readonly parts: Buffer[] = [];

  private tag(field: number, wireType: number): void {
    this.varint(BigInt((field << 3) | wireType));
  }

  private varint(value: bigint): void {
    const bytes: number[] = [];
    let v = BigInt.asUintN(64, value);
    do {
      let byte = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) byte |= 0x80;
      bytes.push(byte);
    } while (v !== 0n);
    this.parts.push(Buffer.from(bytes));
  }

  bytes(field: number, value: Buffer): this {
    this.tag(field, LENGTH_DELIMITED);
    this.varint(BigInt(value.length));
    this.parts.push(value);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, Buffer.from(value, 'utf8'));
  }

  uint(field: number, value: number | bigint): this {
    this.tag(field, VARINT);
    this.varint(BigInt(value));
    return this;
  }

  fixed64(field: number, value: bigint): this {
    return this.eightBytes(field, (b) => b.writeBigUInt64LE(value));
  }

  double(field: number, value: number): this {
    return this.eightBytes(field, (b) => b.writeDoubleLE(value));
  }

  private eightBytes(field: number, fill: (b: Buffer) => void): this {
    this.tag(field, FIXED64);
    const b = Buffer.alloc(8);
    fill(b);
    this.parts.push(b);
    return this;
  }

  message(field: number, write: (m: MessageWriter) => void): this {
    const inner = new MessageWriter();
    write(inner);
    return this.bytes(field, inner.finish());
  }

  finish(): Buffer {
    return Buffer.concat(this.parts);
  }
}

/** KeyValue { key = 1; AnyValue value = 2 }, AnyValue { string 1, bool 2, int64 3, double 4 }. */
function writeAttributes(m: MessageWriter, field: number, attributes: Record<string, AttributeValue>): void {
  for (const [key, value] of Object.entries(attributes)) {
    m.message(field, (kv) =>
      kv.string(1, key).message(2, (any) => {
        if (typeof value === 'string') any.string(1, value);
        else if (typeof value === 'boolean') any.uint(2, value ? 1 : 0);
        else if (INTEGER_ATTRIBUTES.has(key)) any.uint(3, BigInt(Math.trunc(value)));
        else any.double(4, value);
      }),
    );
  }
}

/** Span: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8, attributes 9, status 15 { code 3 }. */
function writeSpan(m: MessageWriter, span: Span): void {
  m.bytes(1, span.traceId).bytes(2, span.spanId);
  if (span.parentSpanId) m.bytes(4, span.parentSpanId);
  m.string(5, span.name).uint(6, span.kind).fixed64(7, span.startTimeNs).fixed64(8, span.endTimeNs);
  writeAttributes(m, 9, span.attributes);
  if (span.statusCode !== undefined) m.message(15, (s) => s.uint(3, span.statusCode!));
}

/**
 * ExportTraceServiceRequest { ResourceSpans resource_spans = 1 }: one resource with `resource` attributes,
 * one scope (Kong's `kong-internal` 0.1.0) holding `spans`.
 */
export function encodeTraces(spans: readonly Span[], resource: Record<string, AttributeValue>): Buffer {
  return new MessageWriter()
    .message(1, (rs) =>
      rs
        .message(1, (r) => writeAttributes(r, 1, resource))
        .message(2, (ss) => {
          ss.message(1, (scope) => scope.string(1, 'kong-internal').string(2, '0.1.0'));
          for (const span of spans) ss.message(2, (s) => writeSpan(s, span));
        }),
    )
    .finish();
}
