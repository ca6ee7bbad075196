/**
 * Answers every request itself (Kong's request-termination handler.lua): a status with Kong's default
 * message, a configured message or raw body, or, with `echo`, a copy of the request. With `trigger`, only
 * requests carrying that header or query parameter are answered; the others pass on.
 */
import { hostname } from 'node:os';
import { parseUntrustedJson, type AccessContext, type PluginApi, type PluginRuntime } from '../../src/pdk/index.ts';
import type { RequestTerminationConfig } from './schema.ts';

/** Kong's messages for the statuses it has one for; other statuses are answered without a body. */
const DEFAULT_MESSAGES: Record<number, string> = {
  401: 'Unauthorized',
  404: 'Not found',
  405: 'Method not allowed',
  500: 'An unexpected error occurred',
  502: 'Bad Gateway',
  503: 'Service unavailable',
};

/** The most of a body `echo` copies; a larger one is echoed as null (it is not held in memory). */
const ECHOED_BODY_LIMIT = 1024 * 1024;

export function createRuntime(api: PluginApi): PluginRuntime<RequestTerminationConfig> {
  return {
    access(ctx, config) {
      if (config.trigger != null && !triggered(ctx, config.trigger)) return;
      if (config.echo) return echo(ctx, config, api.nodeId);
      if (config.body != null) return ctx.respond(config.status_code, config.body, config.content_type ? { 'content-type': config.content_type } : {});
      const message = config.message ?? DEFAULT_MESSAGES[config.status_code];
      ctx.respond(config.status_code, message === undefined ? undefined : { message });
    },
  };
}

function triggered(ctx: AccessContext, trigger: string): boolean {
  return ctx.headers[trigger.toLowerCase()] !== undefined || ctx.query.has(trigger);
}

async function echo(ctx: AccessContext, config: RequestTerminationConfig, nodeId: string): Promise<void> {
  const raw = await ctx.readBodyWithin(ECHOED_BODY_LIMIT);
  const rawBody = raw?.toString('utf8') ?? null;
  ctx.respond(config.status_code, {
    message: config.message ?? DEFAULT_MESSAGES[config.status_code],
    kong: { node_id: nodeId, worker_pid: process.pid, hostname: hostname() },
    request: {
      scheme: ctx.scheme,
      host: ctx.host,
      port: ctx.serverPort,
      headers: ctx.headers,
      query: queryObject(ctx.query),
      body: parsedBody(ctx.headers['content-type'], rawBody),
      raw_body: rawBody,
      method: ctx.method,
      path: ctx.path,
      uri_captures: splitCaptures(ctx.uriCaptures),
    },
    matched_route: ctx.route,
    matched_service: ctx.service,
  });
}

/** Kong's `kong.request.get_query()`: one value per name, repeated names as arrays. */
function queryObject(query: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of query) {
    const prior = out[name];
    out[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  return out;
}

/** Kong's `kong.request.get_body()` for the types it parses without a schema: JSON and forms. */
function parsedBody(contentType: string | undefined, raw: string | null): unknown {
  if (!raw || !contentType) return undefined;
  const type = contentType.split(';')[0].trim().toLowerCase();
  if (type === 'application/x-www-form-urlencoded') return queryObject(new URLSearchParams(raw));
  if (type !== 'application/json') return undefined;
  try {
    return parseUntrustedJson(raw);
  } catch {
    return undefined;
  }
}

/** Kong's `kong.request.get_uri_captures()`: the numbered groups (without the whole match) and the named ones. */
function splitCaptures(captures: Readonly<Record<string, string>>): { named: Record<string, string>; unnamed: string[] } {
  const named: Record<string, string> = {};
  const unnamed: string[] = [];
  for (const [key, value] of Object.entries(captures)) {
    if (!/^\d+$/.test(key)) named[key] = value;
    else if (key !== '0') unnamed[Number(key) - 1] = value;
  }
  return { named, unnamed };
}
