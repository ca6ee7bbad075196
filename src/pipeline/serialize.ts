/**
 * Kong's log serializer (`kong.log.serialize()`, kong/pdk/log.lua): what the logging plugins send, one
 * object per request, field by field as Kong builds it. Computed only when a plugin asks, in the log
 * phase: the request path keeps nothing for it but a few references.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { PeerSource } from '../balancer/peers.ts';
import { RecordedTries } from '../balancer/tries.ts';
import type { SerializedHeaders, SerializedRequest } from '../pdk/types.ts';
import type { CoreContext } from './core-context.ts';

/** Kong's `kong.request.get_headers()`, `get_query()` and `ngx.resp.get_headers()` stop after this many. */
const MAX_SERIALIZED_HEADERS = 100;
const MAX_SERIALIZED_ARGS = 100;

/** What the core keeps of a request for the serializer, beyond the phase contexts. */
export interface SerializedFacts {
  readonly rawPath: string;
  /** The head sent downstream (the upstream's after the response phase, or the gateway's own answer). */
  readonly responseHead: OutgoingHttpHeaders | undefined;
  /** The request's tries: RecordedTries where plugins ran (proxy-step.ts). */
  readonly peers: PeerSource | undefined;
  readonly logFields: Record<string, unknown> | undefined;
  upstreamTarget(): string;
  readonly match: { upstreamPath: string };
}

/** Redacted by Kong whatever the configuration (kong/pdk/log.lua). */
const REDACTED_HEADERS = ['authorization', 'proxy-authorization'];

export function serializeRequest(ctx: CoreContext & SerializedFacts): SerializedRequest {
  const outcome = ctx.outcome;
  const requestUri = ctx.rawQuery ? `${ctx.rawPath}?${ctx.rawQuery}` : ctx.rawPath;
  const port = ctx.serverPort;
  const requestHeaders = headersOfRequest(ctx.raw.req.rawHeaders);
  for (const name of REDACTED_HEADERS) if (requestHeaders[name] !== undefined) requestHeaders[name] = 'REDACTED';
  const responseHeaders = headersOfResponse(ctx.responseHead);
  // Absent when nothing went upstream.
  const recorded = ctx.peers instanceof RecordedTries ? ctx.peers : undefined;
  const tries = recorded?.concluded(outcome.status);
  const proxy = outcome.latencies.upstream ?? -1;
  const root: SerializedRequest = {
    request: {
      id: ctx.id,
      uri: requestUri,
      url: `${ctx.scheme}://${ctx.host}${port === undefined ? '' : ':' + port}${requestUri}`,
      querystring: queryArgs(ctx.rawQuery),
      method: ctx.method,
      headers: requestHeaders,
      size: requestSize(ctx, requestUri) + outcome.requestBytes,
      tls: tlsOf(ctx.raw.req.socket as TLSSocket | undefined),
    },
    // Kong sets it before the access phase: a request answered by the gateway still has the routed one.
    upstream_uri: tries ? ctx.upstreamTarget() : ctx.match.upstreamPath,
    upstream_status: recorded?.upstreamStatus(outcome.upstreamStatus) ?? '',
    response: { status: outcome.status, headers: responseHeaders, size: responseSize(outcome.status, ctx.responseHead) + outcome.responseBytes },
    latencies: {
      kong: outcome.latencies.kong,
      proxy,
      request: outcome.latencies.request,
      receive: proxy === -1 ? 0 : Math.max(0, outcome.latencies.request - outcome.latencies.kong - proxy),
    },
    tries,
    authenticated_entity: ctx.credential ? { id: ctx.credential.id, consumer_id: ctx.consumer?.id } : undefined,
    route: ctx.route,
    service: ctx.service ?? undefined,
    consumer: ctx.consumer ?? undefined,
    client_ip: ctx.clientIp,
    started_at: Math.round(performance.timeOrigin + ctx.startedAt),
    source: outcome.source === 'service' ? 'upstream' : 'kong',
    // Kong OSS serves every entity from its `default` workspace; Tollgate has no other.
    workspace_name: 'default',
  };
  if (ctx.logFields) applyLogValues(root, ctx.logFields);
  return root;
}

/** nginx's `$request_length`: request line, header block and body (HTTP/2's as if in HTTP/1.1 form). */
function requestSize(ctx: CoreContext, requestUri: string): number {
  let size = ctx.method.length + requestUri.length + 12; // " ", " HTTP/1.1", CRLF
  const raw = ctx.raw.req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) size += raw[i].length + raw[i + 1].length + 4;
  return size + 2;
}

/** nginx's `$bytes_sent`: the status line and header block, then the body. */
function responseSize(status: number, head: OutgoingHttpHeaders | undefined): number {
  let size = 17; // "HTTP/1.1 200 \r\n" and the final CRLF, without the reason phrase
  for (const [name, value] of Object.entries(head ?? {})) {
    for (const v of Array.isArray(value) ? value : [value]) size += name.length + String(v).length + 4;
  }
  return size + String(status).length - 3;
}

/** Header fields as Kong shows them: lowercase names, repeated ones as arrays, at most 100 fields. */
function headersOfRequest(raw: string[]): SerializedHeaders {
  const headers: SerializedHeaders = {};
  let count = 0;
  for (let i = 0; i < raw.length && count < MAX_SERIALIZED_HEADERS; i += 2) {
    let name = raw[i].toLowerCase();
    // HTTP/2's pseudo-headers are not header fields; nginx shows `:authority` as Host.
    if (name.charCodeAt(0) === 58) {
      if (name !== ':authority' || headers.host !== undefined) continue;
      name = 'host';
    }
    addHeader(headers, name, raw[i + 1]);
    count++;
  }
  return headers;
}

function headersOfResponse(head: OutgoingHttpHeaders | undefined): SerializedHeaders {
  const headers: SerializedHeaders = {};
  let count = 0;
  for (const [name, value] of Object.entries(head ?? {})) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) {
      if (count++ >= MAX_SERIALIZED_HEADERS) return headers;
      addHeader(headers, name.toLowerCase(), String(v));
    }
  }
  return headers;
}

function addHeader(headers: SerializedHeaders, name: string, value: string): void {
  const prior = headers[name];
  headers[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
}

/**
 * Kong's `kong.request.get_query()` (nginx's get_uri_args): `+` and `%xx` decoded, an argument without
 * `=` is `true`, a repeated one an array, one without a name skipped, at most 100.
 */
function queryArgs(rawQuery: string): SerializedRequest['request']['querystring'] {
  const args: SerializedRequest['request']['querystring'] = {};
  let count = 0;
  for (const part of rawQuery.split('&')) {
    if (part === '') continue;
    if (count++ >= MAX_SERIALIZED_ARGS) break;
    const eq = part.indexOf('=');
    const name = unescapeArg(eq === -1 ? part : part.slice(0, eq));
    if (name === '') continue;
    const value = eq === -1 ? true : unescapeArg(part.slice(eq + 1));
    const prior = args[name];
    args[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  return args;
}

function unescapeArg(text: string): string {
  const spaced = text.replaceAll('+', ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/** Kong's `request.tls`: only on a TLS connection; no client certificate is asked for, so `NONE`. */
function tlsOf(socket: TLSSocket | undefined): SerializedRequest['request']['tls'] {
  const version = socket?.encrypted ? socket.getProtocol() : null;
  if (!version) return undefined;
  return { version, cipher: socket!.getCipher()?.name ?? '', client_verify: 'NONE' };
}

/**
 * Kong's set_serialize_value: a dotted name reaches into nested objects (`\.` is a dot within a name),
 * creating them as needed; `undefined` removes the field. Objects met on the way are copied before they
 * change, so the route, service and consumer the gateway keeps stay untouched. A name that runs through
 * a value that is not an object is skipped (Kong raises an error there).
 */
function applyLogValues(root: Record<string, unknown>, values: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(values)) {
    const path = splitKey(key);
    let node = root;
    let reachable = true;
    for (const step of path.slice(0, -1)) {
      const child = node[step];
      if (child === undefined || child === null) node[step] = {};
      else if (typeof child !== 'object' || Array.isArray(child)) {
        reachable = false;
        break;
      } else node[step] = { ...(child as Record<string, unknown>) };
      node = node[step] as Record<string, unknown>;
    }
    if (!reachable) continue;
    const last = path[path.length - 1];
    if (value === undefined) delete node[last];
    else node[last] = value;
  }
}

function splitKey(key: string): string[] {
  return key.split(/(?<!\\)\./).map((part) => part.replaceAll('\\.', '.'));
}
