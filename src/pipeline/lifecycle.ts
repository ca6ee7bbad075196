/**
 * The request lifecycle, in named steps:
 *   route → protocol checks → access (plugins, by priority) → proxy step (service check, upstream,
 *   response plugins, downstream: proxy-step.ts) → log (plugins, metrics, access log).
 * HTTP requests and WebSocket handshakes share every step up to the upstream.
 */
import { ServerResponse, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { Http2ServerRequest } from 'node:http2';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { AccessLog, Logger } from '../log.ts';
import { parseRequestHost } from '../config/hostnames.ts';
import type { Route } from '../config/types.ts';
import { peerAddress } from '../address-ranges.ts';
import type { HttpEngine } from '../proxy/http-engine.ts';
import { errorAnswer, grpcErrorAnswer, MESSAGES, pluginAnswer, SERVER_TOKEN } from '../proxy/respond.ts';
import { normalizePath, type RouteMatch } from '../router/index.ts';
import type { Snapshot } from '../snapshot.ts';
import { routeLabel, type Metrics } from '../metrics.ts';
import type { UnmatchedRequest } from '../pdk/types.ts';
import { Context, ResponseDownstream, SocketDownstream, type Downstream } from './context.ts';
import type { DownstreamRequest, DownstreamResponse, RanPlugin } from './core-context.ts';
import { ProxyStep, type ProtocolProxy } from './proxy-step.ts';
import { hasBody } from './request-body.ts';
import { contain, failRequest } from './request-failure.ts';

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

const SLASH = 47;
const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)([^#]*)$/i;

export class Lifecycle {
  private readonly proxyStep: ProxyStep;

  constructor(
    private readonly current: () => Snapshot,
    engine: HttpEngine,
    protocols: ProtocolProxy,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly accessLog: AccessLog,
  ) {
    this.proxyStep = new ProxyStep(engine, protocols, (ctx) => this.finish(ctx));
  }

  /** An HTTP request (HTTP/1.1 or HTTP/2). */
  handle(req: DownstreamRequest, res: DownstreamResponse, listener: ListenerInfo): void {
    const downstream = new ResponseDownstream(res);
    const ctx = this.begin(req, res, downstream, listener, false);
    if (!ctx) return;
    res.once('close', () =>
      contain(ctx, () => {
        // A client that goes away aborts the upstream request: no socket or memory left behind.
        // writableEnded, not writableFinished: an HTTP/2 stream the client reset reports itself finished.
        if (!res.writableEnded) ctx.abortUpstream?.();
        this.finish(ctx);
      }),
    );
    contain(ctx, () => this.access(ctx, () => this.proxyStep.proxyRequest(ctx, req, res, listener.port)));
  }

  /** An HTTP/1.1 upgrade request (WebSocket handshake), on a socket the listener has given an error listener. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, listener: ListenerInfo): void {
    const isWebSocket = isWebSocketHandshake(req);
    if (!isWebSocket && !hasBody(req)) return this.ignoreUpgrade(req, socket, listener);
    const downstream = new SocketDownstream(socket);
    const ctx = this.begin(req, null, downstream, listener, isWebSocket);
    if (!ctx) return;
    socket.once('close', () => contain(ctx, () => this.finish(ctx)));
    if (!isWebSocket) return ctx.error(400, 'only WebSocket upgrades (GET over HTTP/1.1) are supported');
    contain(ctx, () => this.access(ctx, () => this.proxyStep.proxyWebSocket(ctx, socket, head, listener.port)));
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
    let url = withoutFragment(req.url ?? '/');
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
    const ambiguous = ambiguousHost(req, http2);
    if (ambiguous) return unrouted(400, ambiguous);
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
      contain(ctx, () => {
        ctx.endAccess();
        next();
      });
    let pending: void | Promise<void> = undefined;
    try {
      pending = this.runAccess(ctx, 0);
    } catch (err) {
      failRequest(ctx, err);
    }
    if (!pending) return done();
    pending.then(done, (err) => {
      failRequest(ctx, err);
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
        failRequest(ctx, err);
        continue;
      }
      if (pending) {
        const rest = () => this.runAccess(ctx, i + 1);
        return pending.then(rest, (err) => {
          failRequest(ctx, err);
          return rest();
        });
      }
    }
  }

  /** The log phase: once, when the response has ended or the client went away. */
  private finish(ctx: Context): void {
    if (ctx.logged) return;
    ctx.logged = true;
    ctx.peers?.release();
    for (const { runtime, plugin } of ctx.ran ?? []) {
      try {
        runtime.log?.(ctx, plugin.config, plugin);
      } catch (err) {
        this.log.error({ err }, 'plugin log phase failed');
      }
    }
    for (const callback of ctx.afterLogCallbacks ?? []) {
      try {
        callback();
      } catch (err) {
        this.log.error({ err }, 'plugin after-log step failed');
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
    const route = routeLabel(ctx?.route);
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

/** The route path prefix the request matched (longest plain path), for plugins that answer under it. */
function matchedPathPrefix(match: RouteMatch): string {
  let best = '';
  for (const p of match.route.paths ?? []) {
    if (!p.startsWith('~') && p.length > best.length && match.normalizedPath.startsWith(p)) best = p;
  }
  return best.endsWith('/') ? best.slice(0, -1) : best;
}

/**
 * The request target without its `#fragment`: a client's own reference inside the resource (RFC 9110 §4.2.5),
 * which no server is meant to get. nginx's `$uri` ends before it too, so Kong never routes on it or sends it on.
 */
function withoutFragment(url: string): string {
  const hash = url.indexOf('#');
  return hash === -1 ? url : url.slice(0, hash);
}

/**
 * Why the request names its host ambiguously (400), or undefined: more than one Host (RFC 9112 §3.2, as
 * nginx refuses), or over HTTP/2 a Host naming another authority than `:authority` (RFC 9113 §8.3.1). The
 * gateway routes on one name; a server behind it that read the other would be serving another host.
 */
function ambiguousHost(req: DownstreamRequest, http2: boolean): string | undefined {
  const raw = req.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === 4 && raw[i].toLowerCase() === 'host' && ++hosts > 1) return MESSAGES.repeatedHost;
  }
  if (!http2 || hosts === 0) return undefined;
  const authority = req.headers[':authority'];
  return typeof authority === 'string' && authority.toLowerCase() !== req.headers.host?.toLowerCase() ? MESSAGES.hostNotAuthority : undefined;
}

/**
 * RFC 6455 §4.1: an opening handshake is a GET of HTTP/1.1 or later. Any other method would be sent
 * upstream as a GET (a HEAD answered with a 101, a POST body taken for frames).
 */
function isWebSocketHandshake(req: IncomingMessage): boolean {
  return req.method === 'GET' && req.httpVersionMinor >= 1 && String(req.headers.upgrade ?? '').toLowerCase() === 'websocket';
}
