/**
 * The proxy step of the request lifecycle: a request whose access phase is over goes to its service.
 * The balancer chooses the peers, the upstream headers are built, and the exchange is handed to the
 * HTTP engine, the gRPC proxy or the WebSocket proxy. Their callbacks note the upstream's status,
 * latency and byte counts on the request, run the plugins' response phase on the head (and on an HTTP
 * body, their rewrites and observers), and answer failures with the gateway's own errors. The log
 * phase stays the lifecycle's; this step calls it when a gRPC stream or a WebSocket tunnel ends.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Duplex, Readable, Writable } from 'node:stream';
import { ServicePeers, type PeerSource } from '../balancer/peers.ts';
import { RecordedTries } from '../balancer/tries.ts';
import type { Service } from '../config/types.ts';
import { UnsendableRequestError } from '../errors.ts';
import type { GrpcTranscoder } from '../pdk/types.ts';
import type { ExchangeHandlers } from '../proxy/exchange.ts';
import type { GrpcHandlers, GrpcRequest, UnaryGrpcHandlers, UnaryGrpcRequest } from '../proxy/grpc.ts';
import { buildUpstreamHeaders, downstreamHeaders } from '../proxy/headers.ts';
import type { HttpEngine } from '../proxy/http-engine.ts';
import { FAILURE_ANSWERS, MESSAGES } from '../proxy/respond.ts';
import type { WebSocketHandlers, WebSocketRequest } from '../proxy/websocket.ts';
import type { UpstreamTls } from '../tls/upstream-tls.ts';
import type { Context } from './context.ts';
import type { DownstreamRequest, DownstreamResponse } from './core-context.ts';
import { hasBody } from './request-body.ts';
import { contain, failRequest } from './request-failure.ts';
import { finishResponseHeaders, RewritingSink, TransformingSink, type BodyRewrite } from './response-phase.ts';

/** Proxies what the HTTP engine does not: gRPC streams and WebSocket tunnels. */
export interface ProtocolProxy {
  grpc(request: GrpcRequest, handlers: GrpcHandlers): void;
  /** One whole call made for a plugin that transcodes an HTTP request (AccessContext.sendAsGrpc). */
  grpcUnary(request: UnaryGrpcRequest, handlers: UnaryGrpcHandlers): () => void;
  upgrade(request: WebSocketRequest, handlers: WebSocketHandlers): void;
  /** Releases pooled upstream sessions and open tunnels (gateway shutdown). */
  close(): void;
}

/** Where a request goes upstream: the service (its protocol, timeouts, retries), the peer of each try, and the TLS settings towards it. */
interface Destination {
  service: Service;
  peers: PeerSource;
  tls: UpstreamTls | undefined;
}

/** Statuses whose responses never carry a body (RFC 9110 §6.4.1, §15.4.5). */
const BODILESS = new Set([204, 304]);

export class ProxyStep {
  constructor(
    private readonly engine: HttpEngine,
    private readonly protocols: ProtocolProxy,
    /**
     * The lifecycle's log phase, for the exchanges whose end only their proxy sees (a gRPC stream, a
     * WebSocket tunnel); an HTTP request's runs when its response closes.
     */
    private readonly finish: (ctx: Context) => void,
  ) {}

  /** An HTTP request after its access phase: to its service over HTTP, or gRPC. */
  proxyRequest(ctx: Context, req: DownstreamRequest, res: DownstreamResponse, listenerPort: number): void {
    if (ctx.responded) return;
    const destination = this.destination(ctx);
    if (!destination) return;
    const headers = this.upstreamHeaders(ctx, listenerPort);
    const protocol = destination.service.protocol;
    // A plugin made this request a gRPC call (grpc-gateway, grpc-web): it asks for trailers, as gRPC clients do, whatever the service.
    if (ctx.grpcTranscoder) headers.te = 'trailers';
    if ((protocol === 'grpc' || protocol === 'grpcs') && ctx.grpcTranscoder && !ctx.isGrpc) return this.proxyTranscoded(ctx, ctx.grpcTranscoder, headers, destination);
    if (protocol === 'grpc' || protocol === 'grpcs') return this.proxyGrpc(ctx, headers, destination);
    this.proxyHttp(ctx, req, res, headers, destination);
  }

  /** A WebSocket handshake after its access phase: tunnelled to its service. */
  proxyWebSocket(ctx: Context, socket: Duplex, head: Buffer, listenerPort: number): void {
    // socket.destroyed: the client left while an asynchronous plugin ran; nothing goes upstream.
    if (ctx.responded || socket.destroyed) return;
    const destination = this.destination(ctx);
    if (!destination) return;
    const headers = this.upstreamHeaders(ctx, listenerPort);
    ctx.status = 101;
    this.tunnel(ctx, socket, head, headers, destination);
  }

  /**
   * The balancer's choice for a service whose host names an upstream (the service itself otherwise),
   * made after the access phase so that hashing sees the authenticated consumer. Null when the route
   * has no service, or its upstream no target to give: answered 503 as Kong does.
   */
  private destination(ctx: Context): Destination | null {
    const service = ctx.service;
    if (!service) {
      ctx.error(503, MESSAGES.noService);
      return null;
    }
    const tls = ctx.snapshot.upstreamTls(service);
    if (ctx.upstreamOrigin) {
      // A plugin chose the origin (Kong's kong.service.set_target): the service's timeouts and TLS still apply.
      const redirected = { ...service, ...ctx.upstreamOrigin };
      ctx.peers = new RecordedTries(new ServicePeers(redirected));
      return { service: redirected, peers: ctx.peers, tls };
    }
    const peers = ctx.snapshot.balancers.peers(service, ctx);
    if (typeof peers === 'string') {
      ctx.error(503, MESSAGES.noPeer);
      return null;
    }
    // The tries are recorded for the log serializer only where a plugin runs that could ask for them.
    const tried = ctx.ran ? new RecordedTries(peers) : peers;
    ctx.peers = tried;
    return { service, peers: tried, tls };
  }

  private upstreamHeaders(ctx: Context, listenerPort: number): OutgoingHttpHeaders {
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
      listenerPort,
      rawHost: ctx.rawHost,
      strippedPrefix: ctx.match.strippedPrefix,
      rawPath: ctx.rawPath,
      peerHost: ctx.peers?.first.hostHeader,
      headerEdits: ctx.headerEdits,
      bodyLength: ctx.body?.length,
    });
  }

  private proxyHttp(
    ctx: Context,
    req: DownstreamRequest,
    res: DownstreamResponse,
    headers: OutgoingHttpHeaders,
    destination: Destination,
  ): void {
    const limit = ctx.bodyLimit;
    // A body read whole is measured too: a plugin may have lowered the limit after it was read.
    const size = ctx.body === undefined ? Number(req.headers['content-length']) : ctx.requestBodyBytes;
    if (size > limit.bytes) return ctx.error(limit.status, MESSAGES.bodyTooLarge);
    const body = ctx.body ?? (hasBody(req) ? ctx.unreadBody() : null);
    if (body !== null && !Buffer.isBuffer(body)) this.meterStreamedBody(ctx, body);
    const sentAt = performance.now();
    const { service, peers, tls } = destination;
    const handle = this.engine.forward(
      {
        service,
        peers,
        tls,
        hostPerPeer: !ctx.route.preserve_host,
        method: ctx.upstreamMethod ?? ctx.method,
        path: ctx.upstreamTarget(),
        headers,
        body,
      },
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
            rewrites = finishResponseHeaders(
              ctx,
              upstream.status,
              out,
              sentAt,
              ctx.method !== 'HEAD' && !BODILESS.has(upstream.status),
            );
          } catch (err) {
            failRequest(ctx, err);
            return null;
          }
          ctx.status = upstream.status;
          const transforms = ctx.bodyTransforms;
          if (transforms) delete out['content-length'];
          const sink = this.bodySink(ctx, res, upstream.status, out, transforms ? undefined : upstreamLength, rewrites);
          return sink && transforms
            ? new TransformingSink(
                sink,
                transforms,
                (chunk) => this.sent(ctx, chunk),
                (err) => this.failTransform(ctx, res, err),
              )
            : sink;
        },
        // A transformed body is counted and observed as it leaves the transforms.
        onBodyChunk: (chunk) => ctx.bodyTransforms === undefined && this.sent(ctx, chunk),
        onFailure: (failure) =>
          contain(ctx, () => {
            // The gateway built a request the HTTP client would not send: its own error (500, logged).
            if (failure instanceof UnsendableRequestError) return failRequest(ctx, failure);
            const [status, message] = FAILURE_ANSWERS[failure.kind];
            // Mid-body, destroyed with an error so that an HTTP/2 client gets RST_STREAM, not a clean (truncated) end.
            if (!res.headersSent) ctx.error(status, message);
            else res.destroy(new Error('the upstream response was cut short'));
            traceUpstreamFailure(ctx, failure, { kind: failure.kind, tries: failure.tries });
          }),
      },
    );
    ctx.abortUpstream = handle.abort;
  }

  private proxyGrpc(ctx: Context, headers: OutgoingHttpHeaders, { peers, tls }: Destination): void {
    this.protocols.grpc(
      {
        service: ctx.service!,
        peers,
        tls,
        authorityPerPeer: !ctx.route.preserve_host,
        method: ctx.method,
        path: ctx.upstreamTarget(),
        headers,
        body: ctx.body,
        req: ctx.raw.req as Http2ServerRequest,
        res: ctx.raw.res as Http2ServerResponse,
        requestId: ctx.id,
      },
      {
        ...this.exchangeHandlers(ctx),
        onRequestBytes: (count) => (ctx.requestBodyBytes += count),
        onResponseBytes: (count) => (ctx.responseBodyBytes += count),
        done: () => contain(ctx, () => this.finish(ctx)),
      },
    );
  }

  /**
   * An HTTP request a plugin turned into a gRPC call: the call goes upstream whole, and the plugin's
   * transcoder turns the whole answer into the HTTP answer, which runs through the response phase. The
   * log phase runs when that answer has gone, as for any HTTP request; a client that goes away first
   * cancels the call.
   */
  private proxyTranscoded(ctx: Context, transcode: GrpcTranscoder, headers: OutgoingHttpHeaders, { service, peers, tls }: Destination): void {
    const body = ctx.body ?? Buffer.alloc(0);
    ctx.requestBodyBytes = body.length;
    const sentAt = performance.now();
    ctx.abortUpstream = this.protocols.grpcUnary(
      { service, peers, tls, authorityPerPeer: !ctx.route.preserve_host, path: ctx.upstreamPath ?? ctx.match.upstreamPath, headers, body },
      {
        onAnswer: (answer, latency) =>
          contain(ctx, () => {
            ctx.upstreamLatency = Math.round(latency);
            ctx.upstreamStatus = answer.status;
            const { status, headers: out, body: answerBody } = transcode(answer);
            out['x-kong-upstream-latency'] = String(ctx.upstreamLatency);
            out['x-kong-proxy-latency'] = String(Math.round(sentAt - ctx.startedAt));
            ctx.send({ status, headers: { ...out, 'content-length': answerBody.length }, body: answerBody }, 'service');
          }),
        onError: (status, message, failure) => {
          ctx.error(status, message);
          if (failure) traceUpstreamFailure(ctx, failure);
        },
        fail: (err) => failRequest(ctx, err),
      },
    );
  }

  private tunnel(
    ctx: Context,
    socket: Duplex,
    head: Buffer,
    headers: OutgoingHttpHeaders,
    { peers, tls }: Destination,
  ): void {
    this.protocols.upgrade(
      {
        service: ctx.service!,
        peers,
        tls,
        hostPerPeer: !ctx.route.preserve_host,
        path: ctx.upstreamTarget(),
        headers,
        socket,
        head,
      },
      {
        ...this.exchangeHandlers(ctx),
        onTunnelClosed: (bytes) => {
          ctx.requestBodyBytes = bytes.fromClient;
          ctx.responseBodyBytes = bytes.toClient;
          contain(ctx, () => this.finish(ctx));
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
      onError: (status, message, failure) => {
        // No answer went out, whatever status was noted for one (a WebSocket handshake is marked 101 before it goes upstream).
        ctx.status = 0;
        ctx.error(status, message);
        if (failure) traceUpstreamFailure(ctx, failure);
      },
      fail: (err) => failRequest(ctx, err),
    };
  }

  /**
   * Where the response body goes once its head is settled: the response itself (its head sent now), or
   * a RewritingSink that sends the head with the rewritten body. Null when Node refused the head.
   */
  private bodySink(
    ctx: Context,
    res: DownstreamResponse,
    status: number,
    out: OutgoingHttpHeaders,
    upstreamLength: OutgoingHttpHeaders[string],
    rewrites: BodyRewrite[] | undefined,
  ): Writable | null {
    if (!rewrites) return this.writeHead(ctx, res, status, out) ? (res as ServerResponse) : null;
    const writeHead = (headers: OutgoingHttpHeaders) => this.writeHead(ctx, res, status, headers);
    return new RewritingSink(ctx, res, out, upstreamLength, rewrites, writeHead, (err) => failRequest(ctx, err));
  }

  /** A plugin's body transform threw: the 500 of an unexpected error when nothing went downstream yet, else the answer cut short. */
  private failTransform(ctx: Context, res: DownstreamResponse, err: unknown): void {
    if (!res.headersSent) return failRequest(ctx, err);
    ctx.log.error({ err, request_id: ctx.id }, 'a plugin transforming the response body failed');
    res.destroy(new Error('the response body transform failed'));
  }

  /** A response body chunk on its way downstream: counted, and shown to the plugins observing it. */
  private sent(ctx: Context, chunk: Buffer): void {
    ctx.responseBodyBytes += chunk.length;
    if (ctx.bodyObservers !== undefined) this.showBodyChunk(ctx, chunk);
  }

  /** Hands a response body chunk to the plugins observing it; one that throws sees no more of it. */
  private showBodyChunk(ctx: Context, chunk: Buffer): void {
    const observers = ctx.bodyObservers!;
    for (let i = 0; i < observers.length; i++) {
      try {
        observers[i](chunk);
      } catch (err) {
        ctx.log.error({ err, request_id: ctx.id }, 'a plugin observing the response body failed');
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
      ctx.log.warn({ err, request_id: ctx.id }, 'invalid upstream response headers');
      ctx.status = 0;
      ctx.error(502, MESSAGES.badGateway);
      return false;
    }
  }

  /**
   * Counts a streamed request body as it flows, for the access log, and enforces the request's body
   * limit on bodies without a Content-Length (chunked): a body is refused as soon as it passes the
   * limit, without being held.
   */
  private meterStreamedBody(ctx: Context, body: Readable): void {
    const { bytes: limit, status } = ctx.bodyLimit;
    const onData = (chunk: Buffer) => {
      ctx.requestBodyBytes += chunk.length;
      if (ctx.requestBodyBytes <= limit) return;
      body.off('data', onData);
      body.unpipe();
      // The upstream got part of a body that will never end: drop that request and its socket.
      ctx.abortUpstream?.();
      contain(ctx, () => {
        if (!ctx.downstream.headersSent) {
          ctx.status = 0;
          ctx.error(status, MESSAGES.bodyTooLarge);
        }
      });
      body.destroy();
    };
    body.on('data', onData);
    // Listening must not start the flow: the engine resumes the body when it sends it.
    body.pause();
  }
}

/** Adds a cookie to the response's own Set-Cookie headers. */
function appendSetCookie(headers: Record<string, unknown>, cookie: string): void {
  const existing = headers['set-cookie'];
  headers['set-cookie'] = existing === undefined ? [cookie] : [...(Array.isArray(existing) ? existing : [String(existing)]), cookie];
}

/**
 * An upstream failure, answered with Kong's 502/503/504: traced at debug with its code and, for the HTTP
 * engine's UpstreamFailure, the code of what caused it (a timeout, a refused certificate chain, a socket error).
 */
function traceUpstreamFailure(ctx: Context, failure: Error, facts: Record<string, unknown> = {}): void {
  if (!ctx.log.isLevelEnabled('debug')) return;
  const code = (err: unknown) => (err as { code?: unknown } | undefined)?.code;
  ctx.log.debug({ request_id: ctx.id, code: code(failure), cause_code: code(failure.cause), ...facts, err: failure.message }, 'upstream failure');
}
