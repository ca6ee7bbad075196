/**
 * Headers across the proxy, as Kong sets them (kong/runloop/handler.lua, kong/templates/nginx_kong.lua):
 * hop-by-hop headers removed both ways, X-Forwarded-* believed only from trusted peers, X-Forwarded-For
 * appended to, Via appended to, Host per preserve_host; and never a client's copy of a header the
 * gateway vouches for.
 */
import { validateHeaderName, validateHeaderValue, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import type { Service } from '../config/types.ts';
import { SERVER_TOKEN } from './respond.ts';

/**
 * Never forwarded as they are: they describe one connection, not the message. `expect` too: our
 * server answered the 100-continue itself, and the whole body follows.
 */
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'http2-settings', 'expect',
]);

/**
 * What no plugin sets upstream: these headers frame the message or manage the connection, which the
 * gateway does for each request and each try. The HTTP client refuses most of them, and a Content-Length
 * other than the body's would cut or stall it. Host stays settable (request-transformer replaces it).
 */
const GATEWAY_OWNED = new Set([...HOP_BY_HOP, 'content-length']);
GATEWAY_OWNED.delete('host');

/** An RFC 9110 §5.6.2 token: what a header name is. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Why a plugin cannot set the upstream header `name`, or undefined when it can. */
export function upstreamHeaderNameProblem(name: string): string | undefined {
  if (!TOKEN.test(name)) return `'${name}' is not a header name`;
  if (GATEWAY_OWNED.has(name.toLowerCase())) return `'${name}' frames the message or manages the connection: the gateway sets it for each request`;
  return undefined;
}

/** Listed in Connection, hence hop-by-hop, but Kong keeps these bare values' headers. */
const CONNECTION_KEEPS = new Set(['keep-alive', 'close', 'upgrade']);

/**
 * Headers the gateway vouches for, in any spelling an upstream may read as theirs: names arrive
 * lowercased, and WSGI, CGI, PHP and Rack turn `-` and `_` alike into `_` (a client's
 * `X_Authenticated_Scope` is their HTTP_X_AUTHENTICATED_SCOPE). Who the caller is (Kong's X-Consumer-*,
 * X-Credential-*, X-Anonymous-*, X-Authenticated-*: set by authentication plugins, whether or not the
 * route has one), where the request came from (X-Forwarded-*, Forwarded, X-Real-IP), the request id.
 */
const VOUCHED = /^x[-_](?:(?:consumer|credential|anonymous|authenticated|forwarded)[-_]|real[-_]ip$|kong[-_]request[-_]id$)|^forwarded$/;
const X = 120;
const F = 102;

/** A client header the upstream must not get as sent; a trusted peer's forwarding headers pass in their usual spelling. */
function isVouchedFor(name: string, trusted: boolean): boolean {
  // Only names starting with `x` or `f` pay for the pattern: one comparison for the rest.
  const first = name.charCodeAt(0);
  if ((first !== X && first !== F) || !VOUCHED.test(name)) return false;
  if (trusted && (name === 'forwarded' || name.startsWith('x-forwarded-'))) return name.includes('_');
  return true;
}

function connectionTokens(value: string | string[] | undefined): string[] {
  if (!value) return [];
  return (Array.isArray(value) ? value.join(',') : value)
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter((t) => t && !CONNECTION_KEEPS.has(t));
}

/** The facts of the client's request that the upstream request's headers are made from. */
export interface UpstreamHeaderFacts {
  clientHeaders: IncomingHttpHeaders;
  requestId: string;
  /** The client's HTTP version, for Via. */
  httpVersion: '1.1' | '2';
  /** A WebSocket handshake: the upgrade goes upstream too. */
  isUpgrade: boolean;
  /** The route's preserve_host: the client's Host goes upstream. */
  preserveHost: boolean;
  /** The canonical host name the client asked for. */
  host: string;
  forwardedProto: string;
  /** The client's address as X-Real-IP tells it (a trusted peer's X-Real-IP, else the peer's). */
  clientIp: string;
  peerIp: string;
  trusted: boolean;
  listenerPort: number;
  /** The raw Host (or :authority) the client sent. */
  rawHost: string;
  /** The prefix strip_path removed ('' when none). */
  strippedPrefix: string;
  rawPath: string;
  /** The Host of the peer the balancer chose (used unless the route preserves the client's). */
  peerHost?: string;
  /** The plugins' edits: a value to set, or null to remove. */
  headerEdits?: ReadonlyMap<string, string | string[] | null>;
  /** The length of a body sent from memory (a plugin read or replaced it). */
  bodyLength?: number;
}

function defaultPort(protocol: string): number {
  return protocol === 'https' || protocol === 'grpcs' || protocol === 'wss' ? 443 : 80;
}

/** Kong's set_host_header: the name, with `:port` unless the port is the protocol's default. */
export function hostWithPort(host: string, port: number, protocol: string): string {
  const name = host.includes(':') ? `[${host}]` : host;
  return port === defaultPort(protocol) ? name : `${name}:${port}`;
}

/** The Host sent upstream: the client's (preserve_host), else the chosen peer's, else the service's own. */
export function upstreamHost(service: Service, facts: Pick<UpstreamHeaderFacts, 'preserveHost' | 'rawHost' | 'peerHost'>): string {
  if (facts.preserveHost && facts.rawHost) return facts.rawHost;
  return facts.peerHost ?? hostWithPort(service.host, service.port, service.protocol);
}

export function buildUpstreamHeaders(service: Service, facts: UpstreamHeaderFacts): OutgoingHttpHeaders {
  const client = facts.clientHeaders;
  const dropped = connectionTokens(client.connection);
  const out: OutgoingHttpHeaders = {};
  const trusted = facts.trusted;
  for (const name in client) {
    if (name.charCodeAt(0) === 58 /* ':' */ || HOP_BY_HOP.has(name) || isVouchedFor(name, trusted)) continue;
    out[name] = client[name];
  }
  for (const name of dropped) delete out[name];

  if (typeof client.te === 'string' && /(^|,)\s*trailers\s*(,|$)/i.test(client.te)) out.te = 'trailers';
  if (facts.isUpgrade) {
    out.connection = 'upgrade';
    out.upgrade = 'websocket';
  }
  out.host = upstreamHost(service, facts);

  const priorXff = client['x-forwarded-for'];
  out['x-forwarded-for'] = priorXff ? `${Array.isArray(priorXff) ? priorXff.join(', ') : priorXff}, ${facts.peerIp}` : facts.peerIp;
  out['x-forwarded-proto'] = facts.forwardedProto;
  out['x-forwarded-host'] = (trusted && firstValue(client['x-forwarded-host'])) || facts.host;
  out['x-forwarded-port'] = (trusted && firstValue(client['x-forwarded-port'])) || String(facts.listenerPort);
  out['x-forwarded-path'] = (trusted && firstValue(client['x-forwarded-path'])) || facts.rawPath;
  const prefix = (trusted && firstValue(client['x-forwarded-prefix'])) || facts.strippedPrefix;
  if (prefix) out['x-forwarded-prefix'] = prefix;
  else delete out['x-forwarded-prefix'];
  out['x-real-ip'] = facts.clientIp;
  const via = `${facts.httpVersion === '2' ? '2' : '1.1'} ${SERVER_TOKEN}`;
  out.via = client.via ? `${client.via}, ${via}` : via;
  out['x-kong-request-id'] = facts.requestId;

  if (facts.headerEdits) {
    for (const [name, value] of facts.headerEdits) {
      if (value === null) delete out[name];
      else out[name] = value;
    }
  }
  if (facts.bodyLength !== undefined) out['content-length'] = String(facts.bodyLength);
  return out;
}

function firstValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Response headers from upstream, cleaned for the client, with Via and the latency headers. */
export function downstreamHeaders(
  upstream: IncomingHttpHeaders,
  clientTe: string | string[] | undefined,
  upstreamHttp2: boolean,
): OutgoingHttpHeaders {
  const dropped = connectionTokens(upstream.connection);
  const out: OutgoingHttpHeaders = {};
  for (const name in upstream) {
    // Pseudo-headers (`:status` of an HTTP/2 upstream) are not response headers.
    if (HOP_BY_HOP.has(name) || name.charCodeAt(0) === 58 /* ':' */) continue;
    out[name] = upstream[name];
  }
  for (const name of dropped) delete out[name];
  if (upstream.trailer && typeof clientTe === 'string' && /trailers/i.test(clientTe)) out.trailer = upstream.trailer;
  const via = `${upstreamHttp2 ? '2' : '1.1'} ${SERVER_TOKEN}`;
  out.via = upstream.via ? `${upstream.via}, ${via}` : via;
  out.server ??= SERVER_TOKEN;
  return out;
}

/**
 * Header lines and the blank line ending them, for answers written on a raw socket. Checked as
 * ServerResponse checks them (it throws the same errors): a line break in a value would let whoever
 * chose it write headers or a whole response of their own.
 */
export function headerLines(headers: OutgoingHttpHeaders): string {
  let out = '';
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    validateHeaderName(name);
    for (const v of Array.isArray(value) ? value : [value]) {
      validateHeaderValue(name, String(v));
      out += `${name}: ${v}\r\n`;
    }
  }
  return out + '\r\n';
}
