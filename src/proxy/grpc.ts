/**
 * gRPC proxying without the services' protos: each downstream HTTP/2 stream is relayed to a grpc
 * (h2c) or grpcs (TLS) upstream over a pooled HTTP/2 session.
 *
 * - Messages stream both ways through pipes, so HTTP/2 flow control gives backpressure end to end.
 * - Metadata (headers) and trailers pass through; trailers-only answers stay trailers-only.
 * - Cancellation goes both ways as RST_STREAM; the client's `grpc-timeout` reaches the upstream and is
 *   also enforced here, so an expired deadline cancels the upstream call even if the client lingers.
 * - The gateway's own failures are gRPC statuses: connect/reset → 14 UNAVAILABLE, timeouts → 4
 *   DEADLINE_EXCEEDED (as trailers-only, or as trailers once the upstream's headers went out).
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type Http2ServerRequest, type Http2ServerResponse, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Logger } from 'pino';
import type { Peer, PeerSource } from '../balancer/peers.ts';
import type { Service } from '../config/types.ts';
import type { GrpcCallAnswer } from '../pdk/types.ts';
import { UpstreamTimeoutError } from '../errors.ts';
import type { UpstreamTls } from '../tls/upstream-tls.ts';
import { contained, type ExchangeHandlers } from './exchange.ts';
import { downstreamHeaders } from './headers.ts';
import { encodeGrpcMessage, failureKind, grpcStatusFor, MESSAGES, upstreamFailureAnswer } from './respond.ts';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;

/** Why a pooled session can take no new stream: it closed (or was told to go away) since it was chosen. */
const SESSION_GONE = new Set(['ERR_HTTP2_INVALID_SESSION', 'ERR_HTTP2_GOAWAY_SESSION', 'ERR_HTTP2_OUT_OF_STREAMS']);

/** Flow-control window per upstream stream and session: large messages do not wait on tiny windows. */
const WINDOW_BYTES = 1 << 20;
/** Streams one pooled session carries before another session is opened next to it (at most). */
const STREAMS_PER_SESSION = 100;
/** Sessions per upstream; past that, calls queue on the least busy session (nghttp2 holds them). */
const SESSIONS_PER_UPSTREAM = 16;

export interface GrpcProxyOptions {
  /** Seconds an idle upstream session is kept. */
  idleTimeoutSec: number;
  log: Logger;
}

/** A call to relay: where it goes, what goes with it, and the client's side of it. */
export interface GrpcRequest {
  /** Protocol (grpc or grpcs), timeouts and retries. */
  service: Service;
  /** Where each try goes (a balancer's targets, or the service's own host and port). */
  peers: PeerSource;
  /** TLS towards a grpcs service. */
  tls?: UpstreamTls;
  /** Each try carries its peer's `:authority` (false: the client's, preserve_host). */
  authorityPerPeer: boolean;
  method: string;
  /** Path and query. */
  path: string;
  /** The upstream request's headers; `host` goes as `:authority`. */
  headers: OutgoingHttpHeaders;
  /** A body a plugin read or set: sent instead of the client's messages. */
  body: Buffer | undefined;
  /** The client's call: the compatibility request and response over its stream. */
  req: Http2ServerRequest;
  res: Http2ServerResponse;
  /** For the log lines. */
  requestId: string;
}

/** What choosing an upstream session needs of a call. */
type SessionCall = Pick<GrpcRequest, 'service' | 'peers' | 'tls'>;

/** A whole call made for a plugin: its length-prefixed messages in memory, its answer read whole. */
export interface UnaryGrpcRequest extends SessionCall {
  authorityPerPeer: boolean;
  /** `/package.Service/Method`. */
  path: string;
  /** The upstream request's headers (HTTP/1.1 hop-by-hop ones are dropped); `host` goes as `:authority`. */
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

export interface UnaryGrpcHandlers extends Pick<ExchangeHandlers, 'onError' | 'fail'> {
  /** The call ended with the upstream's status; `latency`: until its response head. */
  onAnswer(answer: GrpcCallAnswer, latency: number): void;
}

/** The most bytes of messages a unary answer may carry before the call is dropped (502): it is held whole. */
export const UNARY_ANSWER_LIMIT = 16 * 2 ** 20;

/** HTTP/1.1 connection headers HTTP/2 forbids; `te` is set to `trailers`, as gRPC requires. */
const CONNECTION_HEADERS = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'content-length'];

export interface GrpcHandlers extends ExchangeHandlers {
  /** Bytes of the client's messages went upstream. */
  onRequestBytes(count: number): void;
  /** Bytes of the upstream's messages went to the client. */
  onResponseBytes(count: number): void;
  /** The client's stream closed: the call is over (once). */
  done(): void;
}

interface PooledSession {
  session: ClientHttp2Session;
  /** The upstream's SETTINGS arrived: its stream limit is known, streams can be opened. */
  ready: boolean;
  /** Streams open on it (ours, not the peer's count). */
  streams: number;
  /** Requests waiting for the connection to be established. */
  waiting: Array<(err: Error | null) => void>;
}

/** Where and how a session connects: the peer, and the TLS settings towards it. */
interface SessionTarget {
  service: Service;
  peer: Peer;
  tls: UpstreamTls | undefined;
}

/** HTTP/2 sessions per peer and TLS identity, opened on demand, reused. */
class SessionPool {
  private readonly pools = new Map<string, PooledSession[]>();

  constructor(private readonly idleTimeoutMs: number) {}

  /** Calls back with a connected session that has a free stream slot, or the connection error. */
  acquire(target: SessionTarget, callback: (err: Error | null, entry?: PooledSession) => void): void {
    const { service, peer, tls } = target;
    const key = `${service.protocol}|${peer.host}|${peer.port}|${peer.servername ?? ''}|${tls?.key ?? ''}`;
    let pool = this.pools.get(key);
    if (!pool) this.pools.set(key, (pool = []));
    const chosen = pool.find((e) => e.streams < streamLimit(e) && isUsable(e.session)) ?? this.add(target, pool);
    chosen.streams++;
    if (chosen.ready) return callback(null, chosen);
    chosen.waiting.push((err) => {
      if (err) chosen.streams--;
      callback(err, err ? undefined : chosen);
    });
  }

  close(): void {
    for (const pool of this.pools.values()) for (const entry of pool) entry.session.destroy();
    this.pools.clear();
  }

  /** A new session, or the least busy one when the upstream has as many as it may. */
  private add(target: SessionTarget, pool: PooledSession[]): PooledSession {
    if (pool.length < SESSIONS_PER_UPSTREAM) {
      const entry = this.connect(target, pool);
      pool.push(entry);
      return entry;
    }
    return pool.reduce((least, e) => (e.streams < least.streams ? e : least));
  }

  private connect({ service, peer, tls: upstreamTls }: SessionTarget, pool: PooledSession[]): PooledSession {
    const tls = service.protocol === 'grpcs';
    const host = peer.host.includes(':') ? `[${peer.host}]` : peer.host;
    const session = http2.connect(`${tls ? 'https' : 'http'}://${host}:${peer.port}`, {
      rejectUnauthorized: false,
      ...(tls ? { servername: peer.servername, ...upstreamTls?.options } : {}),
      settings: { enablePush: false, initialWindowSize: WINDOW_BYTES },
    });
    const entry: PooledSession = { session, ready: false, streams: 0, waiting: [] };
    const settle = (err: Error | null) => {
      clearTimeout(connectTimer);
      for (const wake of entry.waiting.splice(0)) wake(err);
    };
    const connectTimer = setTimeout(() => session.destroy(new UpstreamTimeoutError('connect timeout')), service.connect_timeout);
    session.once('connect', () => session.setLocalWindowSize(WINDOW_BYTES));
    // Streams opened before the upstream's SETTINGS could exceed its limit and be refused.
    session.once('remoteSettings', () => {
      entry.ready = true;
      settle(null);
    });
    session.on('error', (err) => settle(err));
    const leavePool = () => {
      const at = pool.indexOf(entry);
      if (at !== -1) pool.splice(at, 1);
    };
    // After a GOAWAY the session finishes its open streams but takes no new ones.
    session.once('goaway', leavePool);
    session.once('close', () => {
      settle(new Error('upstream session closed'));
      leavePool();
    });
    session.setTimeout(this.idleTimeoutMs, () => {
      if (entry.streams === 0) session.close();
    });
    return entry;
  }
}

function isUsable(session: ClientHttp2Session): boolean {
  return !session.closed && !session.destroyed;
}

/** Our cap, or the upstream's SETTINGS_MAX_CONCURRENT_STREAMS when lower (beyond it streams would queue). */
function streamLimit(entry: PooledSession): number {
  if (!entry.ready) return STREAMS_PER_SESSION;
  return Math.min(STREAMS_PER_SESSION, entry.session.remoteSettings.maxConcurrentStreams ?? STREAMS_PER_SESSION);
}

export class GrpcProxy {
  private readonly sessions: SessionPool;

  constructor(private readonly options: GrpcProxyOptions) {
    this.sessions = new SessionPool(options.idleTimeoutSec * 1000);
  }

  close(): void {
    this.sessions.close();
  }

  /** Relays the call; `handlers.done` runs once, when the client's stream has closed. */
  proxy(request: GrpcRequest, handlers: GrpcHandlers): void {
    const downstream = request.req.stream;
    downstream.once('close', handlers.done);
    this.withSession(request, handlers, () => downstream.destroyed, (entry, peer) =>
      new GrpcCall(request, callHeaders(request.headers, peer, request.authorityPerPeer), entry, this.options.log, handlers).start(),
    );
  }

  /**
   * Makes one whole call for a plugin that transcodes an HTTP request (grpc-gateway, grpc-web). Returns
   * what cancels it (the client went away): no handler runs after that.
   */
  unary(request: UnaryGrpcRequest, handlers: UnaryGrpcHandlers): () => void {
    let abandoned = false;
    let cancelCall: (() => void) | undefined;
    this.withSession(request, handlers, () => abandoned, (entry, peer) => {
      cancelCall = unaryCall(request, callHeaders(request.headers, peer, request.authorityPerPeer), entry, handlers);
    });
    return () => {
      abandoned = true;
      cancelCall?.();
    };
  }

  /**
   * A pooled session to one of the call's peers, retried on the next peer as the service allows; the
   * last failure is answered with Kong's 502/503/504. `abandoned`: the client left while it connected.
   */
  private withSession(
    { service, peers, tls }: SessionCall,
    handlers: Pick<ExchangeHandlers, 'onError' | 'fail'>,
    abandoned: () => boolean,
    start: (entry: PooledSession, peer: Peer) => void,
  ): void {
    let tries = 0;
    const attempt = (peer: Peer) => {
      this.sessions.acquire(
        { service, peer, tls },
        contained(handlers, (err, entry) => {
          if (abandoned()) {
            if (entry) entry.streams--;
            return;
          }
          if (!err) return start(entry!, peer);
          const timedOut = err instanceof UpstreamTimeoutError;
          peers.failed(failureKind(err as NodeJS.ErrnoException, timedOut));
          // A connect timeout moves on only to another target of a balancer (the same host would time out again).
          const retryable = timedOut ? peers.retriesTimeouts : (err as NodeJS.ErrnoException).code !== undefined;
          const next = retryable && tries++ < service.retries ? peers.next() : null;
          if (next) return attempt(next);
          const [status, message] = upstreamFailureAnswer(err as NodeJS.ErrnoException, timedOut);
          handlers.onError(status, message, err);
        }),
      );
    };
    attempt(peers.first);
  }
}

/** A retry on another target carries that target's `:authority`, as Kong recomputes it on every try. */
function callHeaders(headers: OutgoingHttpHeaders, peer: Peer, authorityPerPeer: boolean): OutgoingHttpHeaders {
  return authorityPerPeer && headers.host !== peer.hostHeader ? { ...headers, host: peer.hostHeader } : headers;
}

/** One proxied call: a downstream stream joined to an upstream stream. */
class GrpcCall {
  private readonly downstream: ServerHttp2Stream;
  private upstream!: ClientHttp2Stream;
  private sentAt = 0;
  /** The gateway decided how the call ends (timeout, deadline, lost upstream). */
  private ended = false;
  /** The upstream sent the call's status (trailers, or a trailers-only answer). */
  private statusReceived = false;
  private deadlineTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly request: GrpcRequest,
    /** The request's headers as this try's peer gets them. */
    private readonly headers: OutgoingHttpHeaders,
    private readonly entry: PooledSession,
    private readonly log: Logger,
    private readonly handlers: GrpcHandlers,
  ) {
    this.downstream = request.req.stream;
  }

  start(): void {
    const { request, downstream, handlers } = this;
    const bodyInMemory = request.body !== undefined;
    try {
      this.upstream = this.entry.session.request(this.requestHeaders(), { endStream: !bodyInMemory && downstream.endAfterHeaders });
    } catch (err) {
      this.entry.streams--;
      // Headers HTTP/2 refuses (a repeated single-value header a plugin set) are the gateway's own error.
      if (!SESSION_GONE.has((err as NodeJS.ErrnoException).code ?? '')) return handlers.fail(err);
      this.log.warn({ err, request_id: request.requestId }, 'gRPC upstream session closed before the call');
      return handlers.onError(502, MESSAGES.badGateway);
    }
    this.sentAt = performance.now();
    const upstream = this.upstream;
    // nginx's grpc_read_timeout: the longest the stream may sit idle (no frame either way).
    upstream.setTimeout(request.service.read_timeout, contained(handlers, () => this.endWith(504, MESSAGES.timeout)));
    this.enforceDeadline();
    upstream.once('response', contained(handlers, (headers: IncomingHttpHeaders, flags: number) => this.onResponse(headers, flags)));
    upstream.once(
      'trailers',
      contained(handlers, (trailers: IncomingHttpHeaders) => {
        this.statusReceived = true;
        request.res.addTrailers(trailers);
      }),
    );
    upstream.on('error', (err) => this.log.debug({ err, request_id: request.requestId }, 'gRPC upstream stream error'));
    upstream.once('close', contained(handlers, () => this.onUpstreamClose()));
    downstream.once('close', contained(handlers, () => this.onDownstreamClose()));

    if (bodyInMemory) upstream.end(request.body);
    else if (!downstream.endAfterHeaders) {
      // Counted for the access log; attached with the pipe, in the same tick, so no chunk goes by unseen.
      request.req.on('data', (chunk: Buffer) => handlers.onRequestBytes(chunk.length));
      request.req.pipe(upstream);
    }
  }

  private requestHeaders(): OutgoingHttpHeaders {
    const { request } = this;
    const out: OutgoingHttpHeaders = {
      ':method': request.method,
      ':scheme': request.service.protocol === 'grpcs' ? 'https' : 'http',
      ':path': request.path,
    };
    for (const name in this.headers) {
      if (name === 'host') out[':authority'] = this.headers.host;
      else out[name] = this.headers[name];
    }
    return out;
  }

  private onResponse(headers: IncomingHttpHeaders, flags: number): void {
    const { request, downstream, handlers } = this;
    const status = Number(headers[':status']) || 200;
    const latency = performance.now() - this.sentAt;
    request.peers.answered(status, latency);
    if (downstream.destroyed || this.ended) return;
    handlers.onUpstreamLatency(latency);
    const out = downstreamHeaders(headers, request.req.headers.te, true);
    handlers.onResponseHead(status, out, this.sentAt);
    out[':status'] = status;
    try {
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) {
        // Trailers-only (an error status): it must stay one HEADERS frame for clients to read it.
        this.statusReceived = true;
        downstream.respond(out, { endStream: true });
        return handlers.onResponseSent(status);
      }
      downstream.respond(out, { waitForTrailers: true });
    } catch (err) {
      this.log.warn({ err, request_id: request.requestId }, 'invalid gRPC upstream response headers');
      return this.endWith(502, MESSAGES.badGateway);
    }
    handlers.onResponseSent(status);
    // Not ended by the pipe: a connection lost mid-response also ends the upstream stream's data,
    // and that end must not reach the client as a complete call without a status.
    this.upstream.on('data', (chunk: Buffer) => handlers.onResponseBytes(chunk.length));
    this.upstream.pipe(downstream, { end: false });
  }

  /** The upstream stream is done (its data all piped): the call ends as the upstream ended it. */
  private onUpstreamClose(): void {
    this.entry.streams--;
    clearTimeout(this.deadlineTimer);
    const { downstream, upstream } = this;
    if (downstream.closed || this.ended) return;
    const code = upstream.rstCode ?? NGHTTP2_NO_ERROR;
    const { session } = this.entry;
    const sessionLost = session.destroyed || session.closed;
    if (this.statusReceived || (code === NGHTTP2_NO_ERROR && !sessionLost)) {
      // The compat response sends the trailers with the end.
      if (!downstream.writableEnded) downstream.end();
      return;
    }
    // The upstream connection went away under the call: UNAVAILABLE, as for a refused connection.
    if (sessionLost) return this.endWith(502, MESSAGES.badGateway);
    // The upstream reset the stream itself (CANCEL, REFUSED_STREAM...): the client gets the same reset.
    downstream.close(code);
  }

  /** The client went away or cancelled: the upstream call is cancelled too. */
  private onDownstreamClose(): void {
    clearTimeout(this.deadlineTimer);
    if (!this.upstream.closed) this.upstream.close(NGHTTP2_CANCEL);
  }

  /** Ends the call with a status of the gateway's own (trailers-only, or as trailers after upstream headers). */
  private endWith(httpStatus: number, message: string): void {
    if (this.ended) return;
    this.ended = true;
    const { downstream, upstream } = this;
    upstream.unpipe(downstream);
    if (!upstream.closed) upstream.close(NGHTTP2_CANCEL);
    if (downstream.closed) return;
    if (!downstream.headersSent) return this.handlers.onError(httpStatus, message);
    if (downstream.writableEnded) return;
    this.request.res.addTrailers({ 'grpc-status': String(grpcStatusFor(httpStatus)), 'grpc-message': encodeGrpcMessage(message) });
    downstream.end();
  }

  /** The client's `grpc-timeout` (gRPC over HTTP/2: digits and a unit), enforced here as well. */
  private enforceDeadline(): void {
    const ms = parseGrpcTimeout(this.request.req.headers['grpc-timeout']);
    // Beyond a timer's range (~24.8 days) Node would fire at once; such a deadline is no deadline.
    if (ms === undefined || ms > MAX_TIMER_MS) return;
    this.deadlineTimer = setTimeout(contained(this.handlers, () => this.endWith(504, 'Deadline exceeded')), ms);
    this.deadlineTimer.unref();
  }
}

/** Sends a unary call on a pooled session and reads its whole answer, bounded in size and idle time; returns what cancels it. */
function unaryCall(request: UnaryGrpcRequest, headers: OutgoingHttpHeaders, entry: PooledSession, handlers: UnaryGrpcHandlers): () => void {
  const out: OutgoingHttpHeaders = { ':method': 'POST', ':scheme': request.service.protocol === 'grpcs' ? 'https' : 'http', ':path': request.path };
  for (const name in headers) if (!CONNECTION_HEADERS.includes(name)) out[name === 'host' ? ':authority' : name] = headers[name];
  out.te = 'trailers';
  let stream: ClientHttp2Stream;
  try {
    stream = entry.session.request(out);
  } catch (err) {
    entry.streams--;
    if (SESSION_GONE.has((err as NodeJS.ErrnoException).code ?? '')) handlers.onError(502, MESSAGES.badGateway);
    else handlers.fail(err);
    return () => {};
  }
  const sentAt = performance.now();
  let settled = false;
  const settle = (answer: () => void) => {
    if (settled) return;
    settled = true;
    if (!stream.closed) stream.close(NGHTTP2_CANCEL);
    answer();
  };
  let head: { status: number; headers: IncomingHttpHeaders; latency: number } | undefined;
  let trailers: IncomingHttpHeaders = {};
  const chunks: Buffer[] = [];
  let size = 0;
  stream.setTimeout(request.service.read_timeout, contained(handlers, () => settle(() => handlers.onError(504, MESSAGES.timeout))));
  stream.once('response', (h: IncomingHttpHeaders) => {
    const latency = performance.now() - sentAt;
    request.peers.answered(Number(h[':status']) || 200, latency);
    head = { status: Number(h[':status']) || 200, headers: h, latency };
  });
  stream.once('trailers', (t: IncomingHttpHeaders) => (trailers = t));
  stream.on('data', contained(handlers, (chunk: Buffer) => {
    size += chunk.length;
    if (size > UNARY_ANSWER_LIMIT) return settle(() => handlers.onError(502, MESSAGES.badGateway));
    chunks.push(chunk);
  }));
  stream.on('error', () => {});
  stream.once('close', contained(handlers, () => {
    entry.streams--;
    const complete = head !== undefined && (stream.rstCode ?? NGHTTP2_NO_ERROR) === NGHTTP2_NO_ERROR;
    if (!complete) return settle(() => handlers.onError(502, MESSAGES.badGateway));
    const { status, headers: answerHeaders, latency } = head!;
    settle(() => handlers.onAnswer({ status, headers: answerHeaders, messages: Buffer.concat(chunks, size), trailers }, latency));
  }));
  stream.end(request.body);
  return () => settle(() => {});
}

const MAX_TIMER_MS = 2 ** 31 - 1;
const TIMEOUT_UNITS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  return m ? Math.ceil(Number(m[1]) * TIMEOUT_UNITS[m[2]]) : undefined;
}
