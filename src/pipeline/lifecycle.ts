/**
 * The request lifecycle, in named steps:
 *   route → protocol checks → access (plugins, by priority) → service check → upstream →
 *   response (plugins) → downstream → log (plugins, metrics, access log).
 * HTTP requests and WebSocket handshakes share every step up to the upstream.
 */
import { ServerResponse, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { AccessLog, Logger } from '../log.ts';
import { parseRequestHost } from '../config/hostnames.ts';
import type { Route } from '../config/types.ts';
import { peerAddress } from '../address-ranges.ts';
import type { ExchangeHandlers } from '../proxy/exchange.ts';
import type { GrpcHandlers, GrpcRequest } from '../proxy/grpc.ts';
import { buildUpstreamHeaders, downstreamHeaders } from '../proxy/headers.ts';
import { HttpEngine } from '../proxy/http-engine.ts';
import { errorAnswer, FAILURE_ANSWERS, grpcErrorAnswer, MESSAGES, pluginAnswer, SERVER_TOKEN } from '../proxy/respond.ts';
import type { WebSocketHandlers, WebSocketRequest } from '../proxy/websocket.ts';
import { normalizePath, type RouteMatch } from '../router/index.ts';
import type { Snapshot } from '../snapshot.ts';
import type { Metrics } from '../metrics.ts';
import { finishResponseHeaders, RewritingSink, type BodyRewrite } from './response-phase.ts';
import { Context, ResponseDownstream, SocketDownstream, type Downstream, type DownstreamRequest, type DownstreamResponse, type RanPlugin } from './context.ts';
import { HttpError, type UnmatchedRequest } from './plugin-api.ts';
import type { PeerSource } from '../balancer/peers.ts';
import type { UpstreamTls } from '../tls/upstream-tls.ts';

export interface ListenerInfo {
  port: number;
  scheme: 'http' | 'https';
}

/** What the log phase records of a request, routed or not. */
interface ObservedRequest {
  id: string;
  status: number;
  startedAt: number;
  upstreamMs: number | undefined;
  method: string;
  path: string;
  ip: string;
  headers: IncomingHttpHeaders;
  responseBytes: number;
}

/** Where a request goes upstream: the peer of each try, and the TLS settings towards it. */
interface Destination {
  peers: PeerSource;
  tls: UpstreamTls | undefined;
}

/** Proxies what the HTTP engine does not: gRPC streams and WebSocket tunnels. */
export interface ProtocolProxy {
  grpc(request: GrpcRequest, handlers: GrpcHandlers): void;
  upgrade(request: WebSocketRequest, handlers: WebSocketHandlers): void;
  /** Releases pooled upstream sessions and open tunnels (gateway shutdown). */
  close(): void;
}

const SLASH = 47;
/** Statuses whose responses never carry a body (RFC 9110 §6.4.1, §15.4.5). */
const BODILESS = new Set([204, 304]);
const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)([^#]*)$/i;

export class Lifecycle {
  constructor(
    private readonly current: () => Snapshot,
    readonly engine: HttpEngine,
    readonly protocols: ProtocolProxy,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly accessLog: AccessLog,
  ) {}

  /** An HTTP request (HTTP/1.1 or HTTP/2). */
  handle(req: DownstreamRequest, res: DownstreamResponse, listener: ListenerInfo): void {
    const downstream = new ResponseDownstream(res);
    const ctx = this.begin(req, res, downstream, listener, false);
    if (!ctx) return;
    res.once('close', () =>
      this.contain(ctx, () => {
        // A client that goes away aborts the upstream request: no socket or memory left behind.
        // writableEnded, not writableFinished: an HTTP/2 stream the client reset reports itself finished.
        if (!res.writableEnded) ctx.abortUpstream?.();
        this.finish(ctx);
      }),
    );
    this.contain(ctx, () => this.access(ctx, () => this.afterAccess(ctx, req, res, listener)));
  }

  /** An HTTP/1.1 upgrade request (WebSocket handshake), on a socket the listener has given an error listener. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, listener: ListenerInfo): void {
    const isWebSocket = isWebSocketHandshake(req);
    if (!isWebSocket && !hasBody(req)) return this.ignoreUpgrade(req, socket, listener);
    const downstream = new SocketDownstream(socket);
    const ctx = this.begin(req, null, downstream, listener, isWebSocket);
    if (!ctx) return;
    socket.once('close', () => this.contain(ctx, () => this.finish(ctx)));
    if (!isWebSocket) return ctx.error(400, 'only WebSocket upgrades (GET over HTTP/1.1) are supported');
    this.contain(ctx, () =>
      this.access(ctx, () => {
        // socket.destroyed: the client left while an asynchronous plugin ran; nothing goes upstream.
        if (ctx.responded || socket.destroyed) return;
        if (!ctx.service) return ctx.error(503, MESSAGES.noService);
        const destination = this.destination(ctx);
        if (!destination) return;
        const headers = this.upstreamHeaders(ctx, listener);
        ctx.status = 101;
        this.proxyWebSocket(ctx, socket, head, headers, destination);
      }),
    );
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
    this.metrics.requestsStarted++;
    const snapshot = this.current();
    const headers = req.headers;
    const http2 = req instanceof Http2ServerRequest;
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
    const unrouted = (status: number, message: string) => {
      const answer = errorAnswer(status, message, id, grpcContent && http2, { server: SERVER_TOKEN, 'x-kong-request-id': id });
      downstream.send(answer, method === 'HEAD');
      const responseBytes = method === 'HEAD' ? 0 : answer.body.length;
      this.observe(null, { id, status: answer.status, startedAt, upstreamMs: undefined, method, path: rawPath, ip: peerIp, headers, responseBytes });
      return null;
    };
    // Routing, X-Forwarded-Host and plugins see one canonical host; what is no host at all goes no further.
    const host = parseRequestHost(rawHost);
    if (host === null) return unrouted(400, MESSAGES.badHost);

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
        method, path: rawPath, rawQuery, headers, host: host.name, rawHost, scheme: listener.scheme, forwardedProto,
        respond: (status, body, extra) => downstream.send(pluginAnswer(grpcContent && http2, status, body, extra), method === 'HEAD'),
      };
      for (const runtime of snapshot.runtimes.values()) if (runtime.unmatched?.(unmatched)) return null;
      // Only misses pay for telling a malformed path (bad %-escape, `*`, authority form) from an unknown one.
      return normalizePath(rawPath) === null ? unrouted(400, MESSAGES.badPath) : unrouted(404, MESSAGES.noRoute);
    }
    const ctx = new Context({
      id, startedAt, scheme: listener.scheme, forwardedProto, httpVersion: http2 ? '2' : '1.1',
      isGrpc: grpcContent && http2, isUpgrade, method, path: match.normalizedPath, rawQuery, headers,
      host: host.name, clientIp: (typeof realIp === 'string' && realIp) || peerIp,
      route: match.route, service: match.service, matchedPrefix: matchedPathPrefix(match),
      req, res, downstream, maxBodySize: snapshot.config.gateway.client_max_body_size,
      match, snapshot, rawPath, rawHost, peerIp, trusted, log: this.log,
    });
    if (method === 'TRACE') ctx.error(405, MESSAGES.methodNotAllowed);
    else this.checkProtocols(ctx, match.route, grpcContent, url);
    return ctx;
  }

  /** Route protocols are checked after the match, as Kong does. */
  private checkProtocols(ctx: Context, route: Route, grpcContent: boolean, url: string): void {
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
      // Kong builds it from nginx's $host: the canonical name, without the port.
      ctx.respond(code, undefined, { location: `https://${ctx.host}${url}` });
    }
  }

  /** The access phase, then `next`; plugin failures are answered with their error. */
  private access(ctx: Context, next: () => void): void {
    // A route without plugins costs nothing here (the proxy's hot path).
    if (ctx.responded || ctx.snapshot.plugins.steps(ctx.route.id).length === 0) return next();
    ctx.accessRunning = true;
    const done = () =>
      this.contain(ctx, () => {
        ctx.endAccess();
        next();
      });
    let pending: void | Promise<void> = undefined;
    try {
      pending = this.runAccess(ctx, 0);
    } catch (err) {
      this.failed(ctx, err);
    }
    if (!pending) return done();
    pending.then(done, (err) => {
      this.failed(ctx, err);
      done();
    });
  }

  /**
   * Runs the access phases from step `from`, by priority. Synchronous until a plugin returns a
   * promise: a request whose plugins all answer at once costs no promise or microtask. Once a plugin
   * has answered (or failed), the others are only collected, as Kong's iterator does: their response
   * and log phases still run on the answer.
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
      if (ctx.responded || !runtime.access) continue;
      let pending: void | Promise<void>;
      try {
        pending = runtime.access(ctx, plugin.config, plugin);
      } catch (err) {
        this.failed(ctx, err);
        continue;
      }
      if (pending) {
        const rest = () => this.runAccess(ctx, i + 1);
        return pending.then(rest, (err) => {
          this.failed(ctx, err);
          return rest();
        });
      }
    }
  }

  private afterAccess(ctx: Context, req: DownstreamRequest, res: DownstreamResponse, listener: ListenerInfo): void {
    if (ctx.responded) return;
    if (!ctx.service) return ctx.error(503, MESSAGES.noService);
    const destination = this.destination(ctx);
    if (!destination) return;
    const headers = this.upstreamHeaders(ctx, listener);
    const protocol = ctx.service.protocol;
    if (protocol === 'grpc' || protocol === 'grpcs') return this.proxyGrpc(ctx, headers, destination);
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

  private upstreamHeaders(ctx: Context, listener: ListenerInfo): OutgoingHttpHeaders {
    return buildUpstreamHeaders(ctx.service!, {
      clientHeaders: ctx.headers,
      requestId: ctx.id,
      httpVersion: ctx.httpVersion,
      isUpgrade: ctx.isUpgrade,
      preserveHost: ctx.route.preserve_host,
      host: ctx.host,
      forwardedProto: ctx.forwardedProto,
      clientIp: ctx.clientIp,
      peerIp: ctx.peerIp,
      trusted: ctx.trusted,
      listenerPort: listener.port,
      rawHost: ctx.rawHost,
      strippedPrefix: ctx.match.strippedPrefix,
      rawPath: ctx.rawPath,
      peerHost: ctx.peers?.first.hostHeader,
      headerEdits: ctx.headerEdits,
      bodyLength: ctx.body?.length,
    });
  }

  private proxyHttp(ctx: Context, req: DownstreamRequest, res: DownstreamResponse, headers: OutgoingHttpHeaders, destination: Destination): void {
    const limit = ctx.snapshot.config.gateway.client_max_body_size;
    const declared = Number(req.headers['content-length']);
    if (ctx.body === undefined && limit > 0 && declared > limit) return ctx.error(413, MESSAGES.bodyTooLarge);
    const body = ctx.body ?? (hasBody(req) ? ctx.unreadBody() : null);
    if (body !== null && !Buffer.isBuffer(body)) this.meterStreamedBody(ctx, body, limit);
    const sentAt = performance.now();
    const { peers, tls } = destination;
    const handle = this.engine.forward(
      { service: ctx.service!, peers, tls, hostPerPeer: !ctx.route.preserve_host, method: ctx.upstreamMethod ?? ctx.method, path: ctx.upstreamTarget(), headers, body },
      {
        onResponse: (upstream) => {
          const now = performance.now();
          peers.answered(upstream.status, now - sentAt);
          if (res.destroyed) return null;
          ctx.upstreamLatency = Math.round(now - sentAt);
          const out = downstreamHeaders(upstream.headers, ctx.headers.te, false);
          if (peers.setCookie) appendSetCookie(out, peers.setCookie);
          const upstreamLength = out['content-length'];
          let rewrites: BodyRewrite[] | undefined;
          try {
            rewrites = finishResponseHeaders(ctx, upstream.status, out, sentAt, ctx.method !== 'HEAD' && !BODILESS.has(upstream.status));
          } catch (err) {
            this.failed(ctx, err);
            return null;
          }
          ctx.status = upstream.status;
          if (!rewrites) return this.writeHead(ctx, res, upstream.status, out) ? (res as ServerResponse) : null;
          const writeHead = (headers: OutgoingHttpHeaders) => this.writeHead(ctx, res, upstream.status, headers);
          return new RewritingSink(ctx, res, out, upstreamLength, rewrites, writeHead, (err) => this.failed(ctx, err));
        },
        onBodyChunk: (chunk) => {
          ctx.responseBodyBytes += chunk.length;
          if (ctx.bodyObservers !== undefined) this.showBodyChunk(ctx, chunk);
        },
        onFailure: (failure) =>
          this.contain(ctx, () => {
            const [status, message] = FAILURE_ANSWERS[failure.kind];
            // Mid-body, destroyed with an error so that an HTTP/2 client gets RST_STREAM, not a clean (truncated) end.
            if (!res.headersSent) ctx.error(status, message);
            else res.destroy(new Error('the upstream response was cut short'));
            this.log.debug({ request_id: ctx.id, kind: failure.kind, tries: failure.tries, err: failure.message }, 'upstream failure');
          }),
      },
    );
    ctx.abortUpstream = handle.abort;
  }

  private proxyGrpc(ctx: Context, headers: OutgoingHttpHeaders, { peers, tls }: Destination): void {
    this.protocols.grpc(
      {
        service: ctx.service!, peers, tls, authorityPerPeer: !ctx.route.preserve_host, method: ctx.method, path: ctx.upstreamTarget(), headers,
        body: ctx.body, req: ctx.raw.req as Http2ServerRequest, res: ctx.raw.res as Http2ServerResponse, requestId: ctx.id,
      },
      {
        ...this.exchangeHandlers(ctx),
        onRequestBytes: (count) => (ctx.requestBodyBytes += count),
        onResponseBytes: (count) => (ctx.responseBodyBytes += count),
        done: () => this.contain(ctx, () => this.finish(ctx)),
      },
    );
  }

  private proxyWebSocket(ctx: Context, socket: Duplex, head: Buffer, headers: OutgoingHttpHeaders, { peers, tls }: Destination): void {
    this.protocols.upgrade(
      { service: ctx.service!, peers, tls, hostPerPeer: !ctx.route.preserve_host, path: ctx.upstreamTarget(), headers, socket, head },
      {
        ...this.exchangeHandlers(ctx),
        onTunnelClosed: (bytes) => {
          ctx.requestBodyBytes = bytes.fromClient;
          ctx.responseBodyBytes = bytes.toClient;
          this.contain(ctx, () => this.finish(ctx));
        },
      },
    );
  }

  /** What the gRPC and WebSocket proxies report, noted on the request. */
  private exchangeHandlers(ctx: Context): ExchangeHandlers {
    return {
      onUpstreamLatency: (ms) => (ctx.upstreamLatency = Math.round(ms)),
      onResponseHead: (status, headers, sentAt) => void finishResponseHeaders(ctx, status, headers, sentAt),
      onResponseSent: (status) => (ctx.status = status),
      onError: (status, message) => {
        // No answer went out, whatever status was noted for one (a WebSocket handshake is marked 101 before it goes upstream).
        ctx.status = 0;
        ctx.error(status, message);
      },
      fail: (err) => this.failed(ctx, err),
    };
  }

  /** Hands a response body chunk to the plugins observing it; one that throws sees no more of it. */
  private showBodyChunk(ctx: Context, chunk: Buffer): void {
    const observers = ctx.bodyObservers!;
    for (let i = 0; i < observers.length; i++) {
      try {
        observers[i](chunk);
      } catch (err) {
        this.log.error({ err, request_id: ctx.id }, 'a plugin observing the response body failed');
        observers.splice(i--, 1);
      }
    }
  }

  /** Sends a proxied response's head; false when Node refuses the headers (then the request got a 502). */
  private writeHead(ctx: Context, res: DownstreamResponse, status: number, headers: OutgoingHttpHeaders): boolean {
    try {
      (res as ServerResponse).writeHead(status, headers);
      return true;
    } catch (err) {
      // Headers Node refuses (e.g. invalid characters from a broken upstream or a plugin).
      this.log.warn({ err, request_id: ctx.id }, 'invalid upstream response headers');
      ctx.status = 0;
      ctx.error(502, MESSAGES.badGateway);
      return false;
    }
  }

  /**
   * Counts a streamed request body as it flows, for the access log, and enforces the size limit
   * (0: none) on bodies without a Content-Length (chunked).
   */
  private meterStreamedBody(ctx: Context, body: Readable, limit: number): void {
    const onData = (chunk: Buffer) => {
      ctx.requestBodyBytes += chunk.length;
      if (limit === 0 || ctx.requestBodyBytes <= limit) return;
      body.off('data', onData);
      body.unpipe();
      // The upstream got part of a body that will never end: drop that request and its socket.
      ctx.abortUpstream?.();
      this.contain(ctx, () => {
        if (!ctx.downstream.headersSent) {
          ctx.status = 0;
          ctx.error(413, MESSAGES.bodyTooLarge);
        }
      });
      body.destroy();
    };
    body.on('data', onData);
    // Listening must not start the flow: the engine resumes the body when it sends it.
    body.pause();
  }

  /**
   * Runs one step of a request (a callback from the event loop, a promise continuation): whatever it
   * throws ends this request, never the process.
   */
  private contain(ctx: Context, step: () => void): void {
    try {
      step();
    } catch (err) {
      this.failed(ctx, err);
    }
  }

  /**
   * Ends the request with the error's answer (an HttpError's status, anything else 500 and logged), or,
   * when its answer has begun, cuts it off (and the upstream exchange with it).
   */
  private failed(ctx: Context, err: unknown): void {
    if (!(err instanceof HttpError)) this.log.error({ err, request_id: ctx.id }, 'request failed');
    if (ctx.responded && ctx.downstream.headersSent) return ctx.downstream.abort();
    try {
      // No answer went out, whatever status was noted for one (an upgrade marked 101, an answer Node refused).
      ctx.status = 0;
      return ctx.fail(err);
    } catch (again) {
      this.log.error({ err: again, request_id: ctx.id }, 'the failure could not be answered');
    }
    ctx.abortUpstream?.();
    ctx.downstream.abort();
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
    this.observe(ctx, {
      id: ctx.id, status: ctx.status || 499, startedAt: ctx.startedAt, upstreamMs: ctx.upstreamLatency, method: ctx.method,
      path: ctx.rawPath, ip: ctx.peerIp, headers: ctx.headers, responseBytes: ctx.responseBodyBytes,
    });
  }

  /** Metrics and the access log, once per request. */
  private observe(ctx: Context | null, r: ObservedRequest): void {
    const latency = performance.now() - r.startedAt;
    const route = ctx?.route.name ?? ctx?.route.id ?? '';
    const service = ctx?.service?.name ?? ctx?.service?.id ?? '';
    const consumer = ctx?.consumer ? (ctx.consumer.username ?? ctx.consumer.id) : undefined;
    this.metrics.observe(route, service, r.status, latency, r.upstreamMs, consumer);
    this.accessLog.write({
      request_id: r.id, method: r.method, path: r.path, status: r.status, route, service, consumer, credential: ctx?.credential?.id,
      client_ip: r.ip, user_agent: r.headers['user-agent'], latency_ms: Math.round(latency), upstream_latency_ms: r.upstreamMs,
      request_body_bytes: ctx?.requestBodyBytes ?? 0, response_body_bytes: r.responseBytes, fields: ctx?.logFields,
    });
  }

}

/** Adds a cookie to the response's own Set-Cookie headers. */
function appendSetCookie(headers: Record<string, unknown>, cookie: string): void {
  const existing = headers['set-cookie'];
  headers['set-cookie'] = existing === undefined ? [cookie] : [...(Array.isArray(existing) ? existing : [String(existing)]), cookie];
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
  if (req instanceof Http2ServerRequest) return !req.stream.endAfterHeaders;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}
