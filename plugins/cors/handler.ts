/**
 * Kong's cors handler.lua: a preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered
 * here with 200 and the Access-Control-Allow-* headers, unless `preflight_continue` sends it upstream;
 * every other answer of the route (the upstream's, another plugin's, an error) gets the origin,
 * credentials and exposed headers in the response phase.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { PluginRuntime, RequestView } from '../../src/pdk/index.ts';
import { matchOrigin, type OriginRule } from './origins.ts';
import { METHODS, type CorsConfig } from './schema.ts';

/** ctx.shared key: this request was a preflight, answered here or passed upstream; its answer needs nothing more. */
const PREFLIGHT = 'cors.preflight';
const ALL_METHODS = METHODS.join(',');

/** Response headers as the two phases set them: on the answer being built, or for whatever answer comes. */
interface HeaderSink {
  set(name: string, value: string): void;
  /** Adds a value beside one already there (Vary). */
  add(name: string, value: string): void;
  clear(name: string): void;
}

export function createRuntime(): PluginRuntime<CorsConfig, OriginRule> {
  return {
    access(ctx, config, plugin) {
      const origin = firstHeader(ctx, 'origin');
      if (ctx.method !== 'OPTIONS' || !origin || ctx.headers['access-control-request-method'] === undefined) return;
      ctx.shared[PREFLIGHT] = true;
      if (config.preflight_continue) return;
      const headers: OutgoingHttpHeaders = {};
      const sink = objectSink(headers);
      const allowAll = configureOrigin(plugin.prepared, sink, origin);
      configureCredentials(config, sink, allowAll, origin);
      const requested = firstHeader(ctx, 'access-control-request-headers');
      if (config.headers && config.headers.length > 0) sink.set('access-control-allow-headers', config.headers.join(','));
      else if (requested) sink.set('access-control-allow-headers', requested);
      sink.set('access-control-allow-methods', config.methods ? config.methods.join(',') : ALL_METHODS);
      if (typeof config.max_age === 'number') sink.set('access-control-max-age', String(config.max_age));
      if (config.private_network && firstHeader(ctx, 'access-control-request-private-network') === 'true') sink.set('access-control-allow-private-network', 'true');
      ctx.respond(200, undefined, headers as Record<string, string>);
    },

    response(ctx, config, head, plugin) {
      if (ctx.shared[PREFLIGHT]) return;
      const origin = firstHeader(ctx, 'origin');
      if (!origin && !config.allow_origin_absent) return;
      const sink = objectSink(head.headers);
      const allowAll = configureOrigin(plugin.prepared, sink, origin);
      configureCredentials(config, sink, allowAll, origin);
      if (config.exposed_headers && config.exposed_headers.length > 0) sink.set('access-control-expose-headers', config.exposed_headers.join(','));
    },
  };
}

/** Kong's configure_origin: sets Access-Control-Allow-Origin; true when every origin is allowed (`*`). */
function configureOrigin(rule: OriginRule, sink: HeaderSink, origin: string | undefined): boolean {
  if (rule.kind === 'any') {
    sink.set('access-control-allow-origin', '*');
    return true;
  }
  // The answer depends on Origin: caches must keep one per origin.
  sink.add('vary', 'Origin');
  if (rule.kind === 'fixed') {
    sink.set('access-control-allow-origin', rule.origin);
    return false;
  }
  const allowed = origin ? matchOrigin(rule.entries, origin) : undefined;
  if (allowed) sink.set('access-control-allow-origin', allowed);
  else sink.clear('access-control-allow-origin');
  return false;
}

/** Kong's configure_credentials: with `*`, credentials are only allowed by echoing the request's origin. */
function configureCredentials(config: CorsConfig, sink: HeaderSink, allowAll: boolean, origin: string | undefined): void {
  if (!config.credentials) return;
  if (!allowAll) return sink.set('access-control-allow-credentials', 'true');
  if (!origin) return;
  sink.add('vary', 'Origin');
  sink.set('access-control-allow-origin', origin);
  sink.set('access-control-allow-credentials', 'true');
}

function objectSink(headers: OutgoingHttpHeaders): HeaderSink {
  return {
    set: (name, value) => void (headers[name] = value),
    add: (name, value) => {
      const prior = headers[name];
      if (prior === undefined) headers[name] = value;
      else headers[name] = Array.isArray(prior) ? [...prior, value] : [String(prior), value];
    },
    clear: (name) => void delete headers[name],
  };
}

function firstHeader(ctx: RequestView, name: string): string | undefined {
  const value = ctx.headers[name];
  return (Array.isArray(value) ? value[0] : value) || undefined;
}
