/**
 * The request lifecycle, in named steps:
 *   route → protocol checks → access (plugins, by priority) → service check → upstream →
 *   response (plugins) → downstream → log (plugins, metrics, access log).
 * HTTP requests and WebSocket handshakes share every step up to the upstream.
 */
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { AccessLog, Logger } from '../log.ts';
import type { Route } from '../config/types.ts';
import { buildUpstreamHeaders, downstreamHeaders, finishResponseHeaders, peerAddress } from '../proxy/headers.ts';
import { HttpEngine } from '../proxy/http-engine.ts';
import { errorAnswer, FAILURE_ANSWERS, grpcErrorAnswer, MESSAGES, pluginAnswer } from '../proxy/respond.ts';
import { normalizePath, type RouteMatch } from '../router/index.ts';
import type { Snapshot } from '../runtime.ts';
import type { Metrics } from '../metrics.ts';
import { Context, ResponseDownstream, SocketDownstream, type Downstream, type DownstreamRequest, type DownstreamResponse, type RanPlugin } from './context.ts';
import type { UnmatchedRequest } from './plugin-api.ts';
import type { PeerSource } from '../balancer/peers.ts';
import type { UpstreamTls } from '../tls/upstream-tls.ts';

export interface ListenerInfo {
  port: number;
  scheme: 'http' | 'https';
}

export interface Stats {
  totalRequests: number;
}

/** Where a request goes upstream: the peer of each try, and the TLS settings towards it. */
export interface Destination {
  peers: PeerSource;
  tls: UpstreamTls | undefined;
}

/** Proxies what the HTTP engine does not: gRPC streams and WebSocket tunnels. */
export interface ProtocolProxy {
  grpc?(ctx: Context, match: RouteMatch, headers: Record<string, unknown>, destination: Destination, done: () => void): void;
  upgrade?(ctx: Context, match: RouteMatch, socket: Duplex, head: Buffer, headers: Record<string, unknown>, destination: Destination, done: () => void): void;
  /** Releases pooled upstream sessions and open tunnels (gateway shutdown). */
  close?(): void;
}

const SLASH = 47;
const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)([^#]*)$/i;

export class Lifecycle {
  readonly stats: Stats = { totalRequests: 0 };
  protocols: ProtocolProxy = {};

  constructor(
    private readonly current: () => Snapshot,
    readonly engine: HttpEngine,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly accessLog: AccessLog,
  ) {}

  /** An HTTP request (HTTP/1.1 or HTTP/2). */
  handle(req: DownstreamRequest, res: DownstreamResponse, listener: ListenerInfo): void {
    const downstream = new ResponseDownstream(res);
    const ctx = this.begin(req, res, downstream, listener, false);
    if (!ctx) return;
    res.once('close', () => {
      // A client that goes away aborts the upstream request: no socket or memory left behind.
      // writableEnded, not writableFinished: an HTTP/2 stream the client reset reports itself finished.
      if (!res.writableEnded) ctx.abortUpstream?.();
      this.finish(ctx);
    });
    this.access(ctx, () => this.afterAccess(ctx, req, res, listener));
  }

  /** An HTTP/1.1 upgrade request (WebSocket handshake). */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, listener: ListenerInfo): void {
    socket.on('error', () => socket.destroy());
    const isWebSocket = isWebSocketHandshake(req);
    if (!isWebSocket && !hasBody(req)) return this.ignoreUpgrade(req, socket, listener);
    const downstream = new SocketDownstream(socket);
    const ctx = this.begin(req, null, downstream, listener, isWebSocket);
    if (!ctx) return;
    socket.once('close', () => this.finish(ctx));
    if (!isWebSocket) return ctx.error(400, 'only WebSocket upgrades (GET over HTTP/1.1) are supported');
    this.access(ctx, () => {
      // socket.destroyed: the client left while an asynchronous plugin ran; nothing goes upstream.
      if (ctx.responded || socket.destroyed) return;
      if (!ctx.service) return ctx.error(503, MESSAGES.noService);
      const destination = this.destination(ctx);
      if (!destination) return;
      const match = ctx.match;
      const headers = this.upstreamHeaders(ctx, match, listener);
      if (!this.protocols.upgrade) return ctx.error(501, 'WebSocket proxying is not available');
      ctx.status = 101;
      this.protocols.upgrade(ctx, match, socket, head, headers as Record<string, unknown>, destination, () => this.finish(ctx));
    });
  }

  /**
   * An upgrade the gateway does not offer (`Upgrade: h2c`, which `curl --http2` sends on http://, or a
   * HEAD or HTTP/1.0 request asking for websocket) is served as the plain HTTP request it also is
   * (RFC 9110 §7.8), then the connection closes.
   */
  private ignoreUpgrade(req: IncomingMessage, socket: Duplex, listener: ListenerInfo): void {
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as Socket);
    res.once('finish', () => {
      res.detachSocket(socket as Socket);
      socket.end();
    });
    this.handle(req, res, listener);
  }

  /** Routing and protocol checks; null when the request was answered already. */
  private begin(req: DownstreamRequest, res: DownstreamResponse | null, downstream: Downstream, listener: ListenerInfo, isUpgrade: boolean): Context | null {
    const startedAt = performance.now();
    this.stats.totalRequests++;
    const snapshot = this.current();
    const headers = req.headers;
    const http2 = req.httpVersionMajor === 2;
    let url = req.url ?? '/';
    let rawHost = (http2 ? (headers[':authority'] as string | undefined) : undefined) ?? headers.host ?? '';
    // An absolute-form target (`GET http://host/path`): its host replaces Host (RFC 9112 §3.2.2).
    const absolute = url.charCodeAt(0) !== SLASH ? ABSOLUTE_FORM.exec(url) : null;
    if (absolute) {
      rawHost = absolute[1];
      url = absolute[2].startsWith('/') ? absolute[2] : '/' + absolute[2];
    }
    const q = url.indexOf('?');
    const rawPath = q === -1 ? url : url.slice(0, q);
    const rawQuery = q === -1 ? '' : url.slice(q + 1);
    const peerIp = peerAddress(req.socket?.remoteAddress);
    const trusted = snapshot.trusted.has(peerIp);
    const xfp = trusted ? headers['x-forwarded-proto'] : undefined;
    const forwardedProto = (typeof xfp === 'string' && xfp.split(',')[0].trim().toLowerCase()) || listener.scheme;
    const realIp = trusted ? headers['x-real-ip'] : undefined;
    const contentType = headers['content-type'];
    const grpcContent = typeof contentType === 'string' && contentType.startsWith('application/grpc');
    const method = req.method ?? 'GET';
    const id = randomUUID();

    const match = snapshot.router.match({
      method,
      path: rawPath,
      host: rawHost,
      port: listener.port,
      headers,
      sni: listener.scheme === 'https' ? ((req.socket as TLSSocket).servername || undefined) : undefined,
      scheme: listener.scheme,
    });
    if (!match) {
      const unmatched: UnmatchedRequest = {
        method, path: rawPath, rawQuery, headers, host: hostOnly(rawHost), rawHost, scheme: listener.scheme, forwardedProto,
        respond: (status, body, extra) => downstream.send(pluginAnswer(grpcContent && http2, status, body, extra), method === 'HEAD'),
      };
      for (const runtime of snapshot.runtimes.values()) if (runtime.unmatched?.(unmatched)) return null;
      // Only misses pay for telling a malformed path (bad %-escape, `*`, authority form) from an unknown one.
      const invalid = normalizePath(rawPath) === null;
      const answer = errorAnswer(invalid ? 400 : 404, invalid ? MESSAGES.badPath : MESSAGES.noRoute, id, grpcContent && http2, { server: 'tollgate/0.1.0', 'x-kong-request-id': id });
      downstream.send(answer, method === 'HEAD');
      this.observe(null, answer.status, startedAt, undefined, method, rawPath, peerIp);
      return null;
    }
    const ctx = new Context({
      id, startedAt, scheme: listener.scheme, forwardedProto, httpVersion: http2 ? '2' : '1.1',
      isGrpc: grpcContent && http2, isUpgrade, method, path: match.normalizedPath, rawQuery, headers,
      host: hostOnly(rawHost), clientIp: (typeof realIp === 'string' && realIp) || peerIp,
      route: match.route, service: match.service, matchedPrefix: matchedPathPrefix(match),
      req, res, downstream, maxBodySize: snapshot.config.gateway.client_max_body_size,
      match, snapshot, rawPath, rawHost, peerIp, trusted,
    });
    if (method === 'TRACE') ctx.error(405, MESSAGES.methodNotAllowed);
    else this.checkProtocols(ctx, match.route, grpcContent, rawHost, url);
    return ctx;
  }

  /** Route protocols are checked after the match, as Kong does. */
  private checkProtocols(ctx: Context, route: Route, grpcContent: boolean, rawHost: string, url: string): void {
    const p = route.protocols;
    const secure = ctx.forwardedProto === 'https';
    if (p.includes('grpc') || p.includes('grpcs')) {
      if (!grpcContent) return ctx.error(415, MESSAGES.nonGrpc);
      if (ctx.httpVersion !== '2') return ctx.error(426, MESSAGES.useHttp2, { connection: 'Upgrade', upgrade: 'HTTP/2' });
      if (!p.includes('grpc') && !secure) return ctx.send(grpcErrorAnswer(200, MESSAGES.grpcsOnly, { 'grpc-status': '1' }));
      return;
    }
    if (p.includes('ws') || p.includes('wss')) {
      if (!ctx.isUpgrade) return ctx.error(400, MESSAGES.badWebSocket);
      if (!p.includes('ws') && !secure) return ctx.error(426, MESSAGES.useHttps, { connection: 'Upgrade', upgrade: 'TLS/1.2, HTTP/1.1' });
      return;
    }
    if (!p.includes('http') && !secure) {
      const code = route.https_redirect_status_code;
      if (code === 426) return ctx.error(426, MESSAGES.useHttps, { connection: 'Upgrade', upgrade: 'TLS/1.2, HTTP/1.1' });
      // Kong builds it from nginx's $host: lowercase, without the port.
      ctx.respond(code, undefined, { location: `https://${hostOnly(rawHost).toLowerCase()}${url}` });
    }
  }

  /** The access phase, then `next`; plugin failures are answered with their error. */
  private access(ctx: Context, next: () => void): void {
    let pending: void | Promise<void>;
    try {
      pending = ctx.responded ? undefined : this.runAccess(ctx, 0);
    } catch (err) {
      return this.failed(ctx, err);
    }
    if (pending) pending.then(next, (err) => this.failed(ctx, err));
    else next();
  }

  /**
   * Runs the access phases from step `from`, by priority. Synchronous until a plugin returns a
   * promise: a request whose plugins all answer at once costs no promise or microtask.
   */
  private runAccess(ctx: Context, from: number): void | Promise<void> {
    const { plugins, runtimes } = ctx.snapshot;
    const steps = plugins.steps(ctx.route.id);
    if (steps.length === 0) return;
    const ran: RanPlugin[] = (ctx.ran ??= []);
    for (let i = from; i < steps.length; i++) {
      const step = steps[i];
      const plugin = plugins.resolve(step, ctx.route, ctx.consumer?.id ?? null);
      const runtime = plugin && runtimes.get(step.name);
      if (!plugin || !runtime) continue;
      ran.push({ runtime, plugin });
      const pending = runtime.access?.(ctx, plugin.config, plugin);
      if (pending) return pending.then(() => (ctx.responded ? undefined : this.runAccess(ctx, i + 1)));
      if (ctx.responded) return;
    }
  }

  private afterAccess(ctx: Context, req: DownstreamRequest, res: DownstreamResponse, listener: ListenerInfo): void {
    if (ctx.responded) return;
    if (!ctx.service) return ctx.error(503, MESSAGES.noService);
    const destination = this.destination(ctx);
    if (!destination) return;
    const headers = this.upstreamHeaders(ctx, ctx.match, listener);
    const protocol = ctx.service.protocol;
    if (protocol === 'grpc' || protocol === 'grpcs') {
      if (!this.protocols.grpc) return ctx.error(501, 'gRPC proxying is not available');
      return this.protocols.grpc(ctx, ctx.match, headers as Record<string, unknown>, destination, () => this.finish(ctx));
    }
    this.proxyHttp(ctx, req, res, headers, destination);
  }

  /**
   * The balancer's choice for a service whose host names an upstream (the service itself otherwise),
   * made after the access phase so that hashing sees the authenticated consumer. Null when the
   * upstream has no target to give: answered 503 as Kong does.
   */
  private destination(ctx: Context): Destination | null {
    const service = ctx.service!;
    const peers = ctx.snapshot.balancers.peers(service, ctx);
    if (typeof peers === 'string') {
      ctx.error(503, MESSAGES.noPeer);
      return null;
    }
    ctx.peers = peers;
    return { peers, tls: ctx.snapshot.upstreamTls(service) };
  }

  private upstreamHeaders(ctx: Context, match: RouteMatch, listener: ListenerInfo) {
    return buildUpstreamHeaders(ctx, ctx.service!, {
      peerIp: ctx.peerIp,
      trusted: ctx.trusted,
      listenerPort: listener.port,
      rawHost: ctx.rawHost,
      strippedPrefix: match.matchedPrefix,
      rawPath: ctx.rawPath,
      peerHost: ctx.peers?.first.hostHeader,
    });
  }

  private proxyHttp(ctx: Context, req: DownstreamRequest, res: DownstreamResponse, headers: ReturnType<Lifecycle['upstreamHeaders']>, destination: Destination): void {
    const limit = ctx.snapshot.config.gateway.client_max_body_size;
    const declared = Number(req.headers['content-length']);
    if (ctx.body === undefined && limit > 0 && declared > limit) return ctx.error(413, MESSAGES.bodyTooLarge);
    const body = ctx.body ?? (hasBody(req) ? req : null);
    if (body === req && limit > 0) this.enforceStreamLimit(ctx, req, limit);
    const path = ctx.match.upstreamPath + (ctx.upstreamQuery ? '?' + ctx.upstreamQuery : '');
    const sentAt = performance.now();
    const { peers, tls } = destination;
    const handle = this.engine.forward(
      { service: ctx.service!, peers, tls, hostPerPeer: !ctx.route.preserve_host, method: ctx.method, path, headers, body },
      {
        onResponse: (upstream) => {
          const now = performance.now();
          peers.answered(upstream.status, now - sentAt);
          if (res.destroyed) return null;
          ctx.upstreamLatency = Math.round(now - sentAt);
          const out = downstreamHeaders(upstream.headers, ctx.headers.te, false);
          if (peers.setCookie) appendSetCookie(out, peers.setCookie);
          finishResponseHeaders(ctx, upstream.status, out, sentAt);
          ctx.status = upstream.status;
          try {
            (res as ServerResponse).writeHead(upstream.status, out);
          } catch (err) {
            // Headers Node refuses (e.g. invalid characters from a broken upstream).
            this.log.warn({ err, request_id: ctx.id }, 'invalid upstream response headers');
            ctx.status = 0;
            ctx.error(502, MESSAGES.badGateway);
            return null;
          }
          return res as ServerResponse;
        },
        onFailure: (failure) => {
          const [status, message] = FAILURE_ANSWERS[failure.kind];
          // Mid-body, destroyed with an error so that an HTTP/2 client gets RST_STREAM, not a clean (truncated) end.
          if (!res.headersSent) ctx.error(status, message);
          else res.destroy(new Error('the upstream response was cut short'));
          this.log.debug({ request_id: ctx.id, kind: failure.kind, tries: failure.tries, err: failure.message }, 'upstream failure');
        },
      },
    );
    ctx.abortUpstream = handle.abort;
  }

  /** Streams without Content-Length (chunked) are counted as they flow. */
  private enforceStreamLimit(ctx: Context, req: DownstreamRequest, limit: number): void {
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return;
      req.off('data', onData);
      req.unpipe();
      // The upstream got part of a body that will never end: drop that request and its socket.
      ctx.abortUpstream?.();
      if (!ctx.downstream.headersSent) {
        ctx.status = 0;
        ctx.error(413, MESSAGES.bodyTooLarge);
      }
      req.destroy();
    };
    req.on('data', onData);
    // Listening must not start the flow: the engine resumes the body when it sends it.
    req.pause();
  }

  private failed(ctx: Context, err: unknown): void {
    if (!(err as { status?: number })?.status) this.log.error({ err, request_id: ctx.id }, 'plugin failed');
    if (!ctx.responded) ctx.fail(err);
  }

  /** The log phase: once, when the response has ended or the client went away. */
  private finish(ctx: Context): void {
    if (ctx.logged) return;
    ctx.logged = true;
    ctx.peers?.release();
    for (const { runtime, plugin } of ctx.ran ?? []) {
      try {
        runtime.log?.(ctx, plugin.config);
      } catch (err) {
        this.log.error({ err }, 'plugin log phase failed');
      }
    }
    this.observe(ctx, ctx.status || 499, ctx.startedAt, ctx.upstreamLatency, ctx.method, ctx.rawPath, ctx.peerIp);
  }

  private observe(ctx: Context | null, status: number, startedAt: number, upstreamMs: number | undefined, method: string, path: string, ip: string): void {
    const latency = performance.now() - startedAt;
    const route = ctx?.route.name ?? ctx?.route.id ?? '';
    const service = ctx?.service?.name ?? ctx?.service?.id ?? '';
    this.metrics.observe(route, service, status, latency, upstreamMs);
    this.accessLog.write({ request_id: ctx?.id, method, path, status, route, service, client_ip: ip, latency_ms: Math.round(latency), upstream_latency_ms: upstreamMs });
  }
}

/** Adds a cookie to the response's own Set-Cookie headers. */
function appendSetCookie(headers: Record<string, unknown>, cookie: string): void {
  const existing = headers['set-cookie'];
  headers['set-cookie'] = existing === undefined ? [cookie] : [...(Array.isArray(existing) ? existing : [String(existing)]), cookie];
}

function hostOnly(rawHost: string): string {
  if (rawHost.startsWith('[')) return rawHost.slice(0, rawHost.indexOf(']') + 1);
  const colon = rawHost.indexOf(':');
  return colon === -1 ? rawHost : rawHost.slice(0, colon);
}

/** The route path prefix the request matched (longest plain path), for plugins that answer under it. */
function matchedPathPrefix(match: RouteMatch): string {
  let best = '';
  for (const p of match.route.paths ?? []) {
    if (!p.startsWith('~') && p.length > best.length && match.normalizedPath.startsWith(p)) best = p;
  }
  return best.endsWith('/') ? best.slice(0, -1) : best;
}

/**
 * RFC 6455 §4.1: an opening handshake is a GET of HTTP/1.1 or later. Any other method would be sent
 * upstream as a GET (a HEAD answered with a 101, a POST body taken for frames).
 */
function isWebSocketHandshake(req: IncomingMessage): boolean {
  return req.method === 'GET' && req.httpVersionMinor >= 1 && String(req.headers.upgrade ?? '').toLowerCase() === 'websocket';
}

function hasBody(req: DownstreamRequest): boolean {
  if (req.httpVersionMajor === 2) return !(req as Http2ServerRequest).stream.endAfterHeaders;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}
