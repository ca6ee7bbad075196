/**
 * Decodes an OTLP/HTTP traces body (`application/x-protobuf`) with the official message definitions
 * (otlp-trace.proto beside this file, through @grpc/proto-loader's protobufjs): the example receiver
 * shows what it got with it, and the tests check the gateway's spans with it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { resolve } from 'node:path';
import * as protoLoader from '@grpc/proto-loader';

const definition = protoLoader.loadSync(resolve(import.meta.dirname, 'otlp-trace.proto'), { keepCase: true, longs: String, enums: Number, defaults: false, oneofs: true });
const exportMethod = (definition['opentelemetry.proto.collector.trace.v1.TraceService'] as protoLoader.ServiceDefinition).Export;

export type DecodedValue = string | number | boolean;

/** A span as received, ids in hex and attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, DecodedValue>;
  /** The attribute's OTLP value type (`string_value`, `int_value`, `double_value`, `bool_value`). */
  attributeTypes: Record<string, string>;
  statusCode: number | undefined;
}

/** One resource's spans, with the headers its request came with. */
export interface ReceivedBatch {
  headers: IncomingHttpHeaders;
  resource: Record<string, DecodedValue>;
  scope: { name: string; version: string };
  spans: ReceivedSpan[];
}

function attributes(list: any[] | undefined): { values: Record<string, DecodedValue>; types: Record<string, string> } {
  const values: Record<string, DecodedValue> = {};
  const types: Record<string, string> = {};
  for (const kv of list ?? []) {
    const kind: string = kv.value.value;
    const raw = kv.value[kind];
    values[kv.key] = kind === 'int_value' ? Number(raw) : raw;
    types[kv.key] = kind;
  }
  return { values, types };
}

export function decodeTraces(body: Buffer, headers: IncomingHttpHeaders): ReceivedBatch[] {
  const request = exportMethod.requestDeserialize(body) as any;
  return request.resource_spans.map((rs: any) => ({
    headers,
    resource: attributes(rs.resource?.attributes).values,
    scope: { name: rs.scope_spans[0].scope.name, version: rs.scope_spans[0].scope.version },
    spans: rs.scope_spans.flatMap((ss: any) =>
      ss.spans.map((s: any): ReceivedSpan => {
        const { values, types } = attributes(s.attributes);
        return {
          traceId: Buffer.from(s.trace_id).toString('hex'),
          spanId: Buffer.from(s.span_id).toString('hex'),
          parentSpanId: Buffer.from(s.parent_span_id ?? []).toString('hex'),
          name: s.name,
          kind: s.kind,
          startNs: BigInt(s.start_time_unix_nano),
          endNs: BigInt(s.end_time_unix_nano),
          attributes: values,
          attributeTypes: types,
          statusCode: s.status?.code,
        };
      }),
    ),
  }));
}
