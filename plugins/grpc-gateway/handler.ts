/**
 * Kong's grpc-gateway (kong/plugins/grpc-gateway/handler.lua, deco.lua): a JSON request that matches one
 * of the proto's REST rules becomes a unary call to the route's gRPC service, and its answer JSON again.
 * The call's message is built from the path's variables, then the body (`body: "*"` or into one field)
 * or, for a rule without a body, the query args; the answer's grpc-status becomes the HTTP status.
 */
import { parseUntrustedJson, type AccessContext, type GrpcCallAnswer, type GrpcTranscoder, type PluginRuntime } from '../../src/pdk/index.ts';
import { frame, unframe } from './frames.ts';
import { decodeMessage, encodeMessage } from './json-message.ts';
import type { Binding, Bindings } from './proto.ts';
import type { GrpcGatewayConfig } from './schema.ts';

const CORS_PREFLIGHT = {
  'content-type': 'application/json',
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET,POST,PATCH,DELETE',
  'access-control-allow-headers': 'content-type',
};

/** google/rpc/code.proto's statuses as HTTP statuses (Kong's grpc_status_map); others are 500. */
const HTTP_STATUS_OF_GRPC: Record<string, number> = {
  0: 200, 1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400, 12: 500, 13: 500, 14: 503, 15: 500, 16: 401,
};

/** Upstream headers the gRPC call does not carry on (the gateway sets its own). */
const ANSWER_HEADERS_LEFT_OUT = new Set(['content-type', 'content-length', 'grpc-encoding', 'grpc-accept-encoding']);

export function createRuntime(): PluginRuntime<GrpcGatewayConfig, Bindings | undefined> {
  return {
    async access(ctx, _config, plugin) {
      ctx.setResponseHeader('access-control-allow-origin', '*');
      if (ctx.method === 'OPTIONS') return ctx.respond(200, 'OK', CORS_PREFLIGHT);
      if (!plugin.prepared) return ctx.respond(400, 'transcoding requests require a .proto file defining the service');
      const found = matchBinding(plugin.prepared, ctx.method.toLowerCase(), ctx.path);
      if (typeof found === 'string') return ctx.respond(400, `failed to transcode .proto file ${found}`);
      const payload = await payloadOf(ctx, found.binding, found.variables);
      if (typeof payload === 'string') return ctx.respond(400, payload);
      let message: Uint8Array;
      try {
        message = encodeMessage(found.binding.input, payload);
      } catch {
        return ctx.respond(400, 'failed to encode payload');
      }
      ctx.setUpstreamBody(frame(message));
      ctx.setUpstreamHeader('content-type', 'application/grpc');
      ctx.setUpstreamMethod('POST');
      ctx.setUpstreamPath(found.binding.grpcPath);
      ctx.setUpstreamQuery('');
      ctx.sendAsGrpc((answer) => jsonAnswer(found.binding, answer));
    },
  };
}

function matchBinding(bindings: Bindings, method: string, path: string): { binding: Binding; variables: Map<string, string> } | string {
  const candidates = bindings.get(method);
  if (!candidates) return `Unknown method "${method}"`;
  for (const binding of candidates) {
    const match = binding.pattern.exec(path);
    if (match) return { binding, variables: new Map(binding.variables.map((name, i) => [name, match.groups[i + 1] ?? ''])) };
  }
  return `Unknown path "${path}"`;
}

/** The call's message as JSON, or the 400's text. */
async function payloadOf(ctx: AccessContext, binding: Binding, variables: Map<string, string>): Promise<Record<string, unknown> | string> {
  const payload: Record<string, unknown> = {};
  for (const [name, value] of variables) setPath(payload, name, value);
  if (binding.body === undefined) {
    for (const name of new Set(ctx.query.keys())) setPath(payload, name, queryValue(binding, name, ctx.query.get(name)!));
    return payload;
  }
  const raw = await ctx.readBody();
  if (raw.length === 0) return payload;
  let body: unknown;
  try {
    body = parseUntrustedJson(raw.toString('utf8'));
  } catch (err) {
    return `decode json err: ${(err as Error).message}`;
  }
  if (binding.body !== '*') payload[binding.body] = body;
  else if (typeof body === 'object' && body !== null && !Array.isArray(body)) Object.assign(payload, body);
  else return 'body must be a table';
  return payload;
}

/** A query arg as its field takes it: a bool is true unless `0` or `false` (Kong's encode_fix), other types as text. */
function queryValue(binding: Binding, name: string, value: string): unknown {
  let type = binding.input;
  const parts = name.split('.');
  for (const part of parts.slice(0, -1)) {
    const next = type.fields[part]?.resolvedType;
    if (!(next && 'fields' in next)) return value;
    type = next as typeof type;
  }
  const field = type.fields[parts[parts.length - 1]];
  return field?.type === 'bool' ? value !== '0' && value !== 'false' : value;
}

/** Sets `a.b.c` in `target`, making the objects on the way. */
function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let at = target;
  for (const part of parts.slice(0, -1)) {
    const next = at[part];
    at = (at[part] = typeof next === 'object' && next !== null ? next : {}) as Record<string, unknown>;
  }
  at[parts[parts.length - 1]] = value;
}

/** Each message of the answer as JSON, one after the other (a stream's too); the grpc-status as the HTTP status. */
function jsonAnswer(binding: Binding, answer: GrpcCallAnswer): ReturnType<GrpcTranscoder> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries({ ...answer.headers, ...answer.trailers })) {
    if (!name.startsWith(':') && !ANSWER_HEADERS_LEFT_OUT.has(name) && value !== undefined) headers[name] = value;
  }
  headers['content-type'] = 'application/json';
  const grpcStatus = headers['grpc-status'];
  const status = grpcStatus === undefined ? 200 : (HTTP_STATUS_OF_GRPC[String(grpcStatus)] ?? 500);
  const { frames } = unframe(answer.messages);
  const body = Buffer.from(frames.map((f) => JSON.stringify(decodeMessage(binding.output, f.payload))).join(''));
  return { status, headers, body };
}
