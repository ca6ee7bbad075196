/**
 * JSON ↔ protobuf messages as Kong's grpc-gateway gives them to lua-protobuf: field names as in the
 * proto, every field of an answer present with its default (an empty repeated field is `[]`), enums by
 * name, 64-bit integers as numbers, bytes in base64, a message field left unset absent, and
 * google.protobuf.Timestamp as an ISO 8601 UTC date-time (`2026-01-02T03:04:05`, Kong's `${iso}`).
 * A request value of the wrong type is refused (Kong's "failed to encode payload"), unknown fields are
 * left out.
 */
import protobuf from 'protobufjs';

const TIMESTAMP = '.google.protobuf.Timestamp';
const NUMBER_TYPES = new Set(['double', 'float', 'int32', 'uint32', 'sint32', 'fixed32', 'sfixed32', 'int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
const INTEGER_TEXT = /^-?\d{1,20}$/;

/** A request value a field cannot take. */
export class PayloadTypeError extends Error {
  override readonly name = 'PayloadTypeError';
  readonly code = 'GRPC_GATEWAY_ERR_PAYLOAD';
}

/** The message `type` encoded from a JSON object. */
export function encodeMessage(type: protobuf.Type, payload: Record<string, unknown>): Uint8Array {
  return type.encode(type.fromObject(messageObject(type, payload))).finish();
}

function messageObject(type: protobuf.Type, value: unknown): Record<string, unknown> {
  if (!isObject(value)) throw new PayloadTypeError(`${type.name}: expected an object`);
  const out: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(value)) {
    const field = type.fields[name];
    if (field) out[name] = fieldValue(field.resolve(), v);
  }
  return out;
}

function fieldValue(field: protobuf.Field, value: unknown): unknown {
  if (field instanceof protobuf.MapField) {
    if (!isObject(value)) throw new PayloadTypeError(`${field.name}: expected an object`);
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, singleValue(field, v)]));
  }
  if (field.repeated) {
    if (!Array.isArray(value)) throw new PayloadTypeError(`${field.name}: expected an array`);
    return value.map((v) => singleValue(field, v));
  }
  return singleValue(field, value);
}

function singleValue(field: protobuf.Field, value: unknown): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return resolved.fullName === TIMESTAMP ? timestampObject(value) : messageObject(resolved, value);
  if (resolved instanceof protobuf.Enum) {
    if (typeof value === 'string' && value in resolved.values) return resolved.values[value];
    if (Number.isInteger(value)) return value;
    throw new PayloadTypeError(`${field.name}: not a value of ${resolved.name}`);
  }
  if (NUMBER_TYPES.has(field.type)) {
    if (typeof value === 'number' || (typeof value === 'string' && INTEGER_TEXT.test(value))) return value;
  } else if (field.type === 'bool') {
    if (typeof value === 'boolean') return value;
  } else if (typeof value === 'string') return value; // string, or bytes in base64
  throw new PayloadTypeError(`${field.name}: expected a ${field.type}`);
}

/** An RFC 3339 date-time (UTC when it names no offset) as a Timestamp's seconds and nanos. */
function timestampObject(value: unknown): { seconds: number; nanos: number } {
  if (typeof value !== 'string') throw new PayloadTypeError('expected a time string');
  const ms = Date.parse(/(Z|[+-]\d\d:?\d\d)$/i.test(value) ? value : `${value}Z`);
  if (Number.isNaN(ms)) throw new PayloadTypeError(`not a time: ${value}`);
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 };
}

/** The JSON of a decoded message of `type`. */
export function decodeMessage(type: protobuf.Type, bytes: Uint8Array): Record<string, unknown> {
  return messageJson(type, type.decode(bytes) as unknown as Record<string, unknown>);
}

function messageJson(type: protobuf.Type, message: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of type.fieldsArray) {
    const value = message[field.name];
    if (value === null || value === undefined) continue;
    if (field instanceof protobuf.MapField) out[field.name] = Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, jsonValue(field, v)]));
    else if (field.repeated) out[field.name] = (value as unknown[]).map((v) => jsonValue(field, v));
    else out[field.name] = jsonValue(field, value);
  }
  return out;
}

function jsonValue(field: protobuf.Field, value: unknown): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) {
    const message = value as Record<string, unknown>;
    return resolved.fullName === TIMESTAMP ? isoSeconds(Number(message.seconds)) : messageJson(resolved, message);
  }
  if (resolved instanceof protobuf.Enum) return resolved.valuesById[value as number] ?? value;
  if (typeof value === 'object' && value !== null && 'toNumber' in value) return (value as { toNumber(): number }).toNumber();
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  return value;
}

function isoSeconds(seconds: number): string {
  return new Date(seconds * 1000).toISOString().slice(0, 19);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
