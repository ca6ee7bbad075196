/**
 * Kong's grpc-web (kong/plugins/grpc-web/handler.lua): a browser's gRPC-Web call over HTTP/1.1 (binary,
 * base64 text, or JSON with the proto) becomes a call to the route's gRPC service, and the answer a
 * gRPC-Web body whose last frame carries the call's status, as browsers cannot read HTTP trailers.
 */
import type { AccessContext, GrpcCallAnswer, GrpcTranscoder, PluginRuntime } from '../../src/pdk/index.ts';
import type { MethodTypes } from '../grpc-gateway/public.ts';
import { codecOf, downstreamBody, upstreamBody, type Codec } from './codecs.ts';
import type { GrpcWebConfig } from './schema.ts';

/** The proto's methods by gRPC path, when the instance has a proto. */
export type Methods = ReadonlyMap<string, MethodTypes> | undefined;

const PREFLIGHT = {
  'content-type': 'application/grpc-web-text+proto',
  'access-control-allow-methods': 'POST',
  'access-control-allow-headers': 'content-type,x-grpc-web,x-user-agent',
};

/** Upstream headers left out of the answer: the codec's content type replaces them, the body is re-encoded. */
const ANSWER_HEADERS_LEFT_OUT = new Set(['content-type', 'content-length', 'grpc-encoding', 'grpc-accept-encoding']);

export function createRuntime(): PluginRuntime<GrpcWebConfig, Methods> {
  return {
    async access(ctx, config, plugin) {
      const origin = config.allow_origin_header ?? '*';
      ctx.setResponseHeader('access-control-allow-origin', origin);
      if (ctx.method === 'OPTIONS') return ctx.respond(200, 'OK', { ...PREFLIGHT, 'access-control-allow-origin': origin });
      const path = config.pass_stripped_path ? strippedPath(ctx) : ctx.path;
      const codec = codecOf(ctx.headers['content-type']);
      let types: MethodTypes | undefined;
      if (codec.json !== false) {
        if (!plugin.prepared) return ctx.respond(400, 'transcoding requests require a .proto file defining the service');
        types = plugin.prepared.get(path);
        if (!types) return ctx.respond(400, `Unknown path "${path}"`);
      }
      let body: Buffer;
      try {
        body = upstreamBody(codec, types, await ctx.readBody());
      } catch (err) {
        return ctx.respond(400, `cannot transcode the request: ${(err as Error).message}`);
      }
      if (config.pass_stripped_path) ctx.setUpstreamPath(path);
      ctx.setUpstreamHeader('content-type', 'application/grpc');
      ctx.setUpstreamBody(body);
      ctx.sendAsGrpc((answer) => webAnswer(codec, types, answer));
    },
  };
}

/** The path without the prefix the route strips (nginx's $upstream_uri for a service without a path). */
function strippedPath(ctx: AccessContext): string {
  if (!ctx.route.strip_path || !ctx.matchedPrefix) return ctx.path;
  const rest = ctx.path.slice(ctx.matchedPrefix.length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

function webAnswer(codec: Codec, types: MethodTypes | undefined, answer: GrpcCallAnswer): ReturnType<GrpcTranscoder> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) {
    if (!name.startsWith(':') && !ANSWER_HEADERS_LEFT_OUT.has(name) && value !== undefined) headers[name] = value;
  }
  headers['content-type'] = codec.mimetype;
  // A trailers-only answer carries its status among the headers.
  const status = { ...answer.headers, ...answer.trailers };
  const body = downstreamBody(codec, types, answer.messages, { code: String(status['grpc-status'] ?? '0'), message: String(status['grpc-message'] ?? '') });
  return { status: answer.status, headers, body };
}
