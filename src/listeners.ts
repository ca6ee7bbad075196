/**
 * Listeners from Kong's listen strings:
 *   plain           HTTP/1.1
 *   ssl             HTTPS/1.1
 *   ssl http2       TLS with ALPN h2 and http/1.1 on one port
 *   http2 (no ssl)  h2c with prior knowledge, still answering HTTP/1.1 on the same port
 * Every socket is tracked so shutdown can drain and then close what is left.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import type { SecureContext } from 'node:tls';
import { ClientTimeouts } from './client-timeouts.ts';
import type { ListenSpec } from './config/listen.ts';
import { ResponseDownstream, SocketDownstream } from './pipeline/context.ts';
import { grpcErrorAnswer, jsonAnswer } from './proxy/respond.ts';
import type { TlsMaterial } from './tls.ts';

export interface ListenerHandlers {
  request(req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void;
  upgrade?(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export interface ListenerTls extends TlsMaterial {
  /** The certificate for a client's server name (SNI); undefined keeps the default pair above. */
  certificateFor?(servername: string): SecureContext | undefined;
}

export interface ListenerLimits {
  maxHeaderSize: number;
  /** Idle timeout of a downstream connection, ms. */
  clientTimeout: number;
}

export interface ConnectionEvents {
  opened(): void;
  closed(): void;
  /** A failure the request path let escape: its request was answered 500 or its connection closed. */
  failed(err: unknown): void;
}

const MAX_CONCURRENT_STREAMS = 128;
const HEADERS_TOO_LARGE = 'Request header or cookie too large';
const MISSING_HOST = 'Bad Request: HTTP/1.1 requests need a Host header';
const VERSION_NOT_SUPPORTED = 'HTTP Version Not Supported';
const UNEXPECTED = 'An unexpected error occurred';

/**
 * A Kong-style JSON error, on a response or (no request object to answer through) a raw socket then closed.
 * `close`: the connection closes after it (the rest of what the client sends cannot be trusted or read).
 */
function refuse(to: ServerResponse | Http2ServerResponse | Duplex, status: number, message: string, close = false): void {
  if (to instanceof Duplex) return new SocketDownstream(to).send(jsonAnswer(status, { message }), false);
  // HTTP/2 has no Connection header: there the stream ends and the session goes on.
  const headers = close && !(to instanceof http2.Http2ServerResponse) ? { connection: 'close' } : {};
  new ResponseDownstream(to).send(jsonAnswer(status, { message }, headers), false);
}

/** What is left to do with a request whose handling failed: answer 500 if nothing went out yet, else cut it off. */
function answerFailure(to: ServerResponse | Http2ServerResponse | Duplex): void {
  try {
    if (to instanceof Duplex || !to.headersSent) return refuse(to, 500, UNEXPECTED, true);
  } catch {
    // Answering failed too: only closing is left.
  }
  to.destroy();
}

/** RFC 9112 §3.2: an HTTP/1.1 request must carry Host. */
const lacksHost = (req: IncomingMessage) => req.httpVersionMinor === 1 && req.headers.host === undefined;

/**
 * The HTTP/1 parser also reads `HTTP/2.0` and `HTTP/0.9` request lines; such a request is neither the
 * HTTP/1.x this connection speaks nor a real HTTP/2 stream, and the rest of the gateway must never see it.
 */
const speaksHttp1 = (req: IncomingMessage) => req.httpVersionMajor === 1;

/**
 * CONNECT (a forward-proxy tunnel) is not offered: a JSON 405, where Node would drop an HTTP/1.1
 * connection without a word or answer an HTTP/2 stream with an empty 405. HTTP/2 servers emit
 * 'connect' with a response to answer on, HTTP/1.1 servers with the raw socket.
 */
function refuseConnect(server: net.Server): void {
  server.on('connect', (_req: IncomingMessage | Http2ServerRequest, target: Duplex | Http2ServerResponse) => refuse(target, 405, 'Method not allowed'));
}

/**
 * What Node's servers let through or answer without a body:
 * - an HTTP/2 header list (RFC 7541 §4.1: name + value + 32 per field) over max_header_size gets 431,
 *   as over HTTP/1.1, a gRPC status for a gRPC call (Node's HTTP/2 server only resets the stream,
 *   past its own fixed ~64 KB);
 * - an HTTP/1 request line of another version gets 505 (RFC 9110 §15.6.6);
 * - an HTTP/1.1 request without Host gets 400 (RFC 9112 §3.2), with a JSON body.
 * And a failure the handler lets escape ends this request only (500, or its connection closed).
 */
function guardRequests(next: ListenerHandlers['request'], maxHeaderSize: number, events: ConnectionEvents): ListenerHandlers['request'] {
  return (req, res) => {
    try {
      if (req instanceof http2.Http2ServerRequest) {
        let size = 0;
        const raw = req.rawHeaders;
        for (let i = 0; i < raw.length; i += 2) size += raw[i].length + raw[i + 1].length + 32;
        if (size > maxHeaderSize) return refuseHeaderSize(req, res as Http2ServerResponse);
      } else {
        lingerOnEarlyClose(req);
        if (!speaksHttp1(req)) return refuse(res, 505, VERSION_NOT_SUPPORTED, true);
        if (lacksHost(req)) return refuse(res, 400, MISSING_HOST);
      }
      next(req, res);
    } catch (err) {
      events.failed(err);
      answerFailure(res);
    }
  };
}

/** How long a connection closed after an early answer keeps reading what its client still sends (nginx: lingering_time). */
const LINGER_MS = 5_000;
/** Each HTTP/1 connection's latest request: whether its body was read whole decides how the connection closes. */
const latestRequest = new WeakMap<Socket, IncomingMessage>();

/**
 * nginx's lingering close. A connection that closes after an answer given before its request body was
 * read whole (a 413, a refusal of a `Connection: close` request) would be closed under a client that is
 * still writing that body: its next write meets a reset, which can discard the answer before the client
 * reads it. Such a connection is half-closed instead (the answer, then FIN) and what the client still
 * sends is read and dropped (Node's parser discards an unread body) until it closes, for at most LINGER_MS.
 */
function lingerOnEarlyClose(req: IncomingMessage): void {
  const socket = req.socket;
  const known = latestRequest.has(socket);
  latestRequest.set(socket, req);
  if (known) return;
  const destroySoon = socket.destroySoon.bind(socket);
  socket.destroySoon = () => {
    if (latestRequest.get(socket)?.complete !== false) return destroySoon();
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref();
    socket.once('close', () => clearTimeout(timer));
  };
}

/** gRPC clients read a status only from grpc-status (one HEADERS frame, no body), never from JSON. */
function refuseHeaderSize(req: Http2ServerRequest, res: Http2ServerResponse): void {
  if (!req.headers['content-type']?.startsWith('application/grpc')) return refuse(res, 431, HEADERS_TOO_LARGE);
  new ResponseDownstream(res).send(grpcErrorAnswer(431, HEADERS_TOO_LARGE), false);
}

function guardUpgrades(next: NonNullable<ListenerHandlers['upgrade']>, timeouts: ClientTimeouts, events: ConnectionEvents): ListenerHandlers['upgrade'] {
  return (req, socket, head) => {
    // Node hands an upgraded socket over without its own error listener or timeout: an error event with
    // no listener would reach the process.
    socket.on('error', () => socket.destroy());
    try {
      timeouts.upgraded(socket);
      if (!speaksHttp1(req)) return refuse(socket, 505, VERSION_NOT_SUPPORTED);
      if (lacksHost(req)) return refuse(socket, 400, MISSING_HOST);
      next(req, socket, head);
    } catch (err) {
      events.failed(err);
      answerFailure(socket);
    }
  };
}

function sniCallback(tls: ListenerTls): ((servername: string, callback: (err: Error | null, context?: SecureContext) => void) => void) | undefined {
  const certificateFor = tls.certificateFor;
  if (!certificateFor) return undefined;
  return (servername, callback) => {
    try {
      callback(null, certificateFor(servername));
    } catch (err) {
      // A certificate that cannot be used fails this handshake only.
      callback(err as Error);
    }
  };
}

/** The HTTP/2 connection preface a client with prior knowledge sends first. */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export class Listener {
  private readonly sockets = new Set<Socket>();
  private readonly sessions = new Set<Http2Session>();
  private readonly http1: http.Server | undefined;

  private constructor(
    readonly spec: ListenSpec,
    private readonly server: net.Server,
    http1: http.Server | undefined,
    h2: http2.Http2Server | http2.Http2SecureServer | undefined,
    events: ConnectionEvents,
  ) {
    this.http1 = http1;
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      events.opened();
      socket.once('close', () => {
        this.sockets.delete(socket);
        events.closed();
      });
    });
    h2?.on('session', (session: Http2Session) => {
      this.sessions.add(session);
      session.once('close', () => this.sessions.delete(session));
      session.on('error', () => session.destroy());
    });
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    const host = this.spec.host.includes(':') ? `[${this.spec.host}]` : this.spec.host;
    return `${this.spec.ssl ? 'https' : 'http'}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${this.port}`;
  }

  static async open(
    spec: ListenSpec,
    tls: ListenerTls | undefined,
    handlers: ListenerHandlers,
    limits: ListenerLimits,
    events: ConnectionEvents,
  ): Promise<Listener> {
    const timeouts = new ClientTimeouts(limits.clientTimeout, (res) => refuse(res, 408, 'Request Timeout', true));
    const http1Options: http.ServerOptions = {
      maxHeaderSize: limits.maxHeaderSize,
      ...timeouts.http1Settings,
      // Checked by guardRequests, which answers with a JSON body (Node's own 400 has none).
      requireHostHeader: false,
    };
    // 128 concurrent streams per connection, as Kong (nginx's http2_max_concurrent_streams): Node's
    // default is unbounded, one client could hold any number of upstream calls open.
    const h2Options = {
      maxHeaderListPairs: 200,
      maxSendHeaderBlockLength: limits.maxHeaderSize,
      settings: { maxHeaderListSize: limits.maxHeaderSize, maxConcurrentStreams: MAX_CONCURRENT_STREAMS },
    };
    handlers = {
      request: guardRequests(handlers.request, limits.maxHeaderSize, events),
      upgrade: handlers.upgrade && guardUpgrades(handlers.upgrade, timeouts, events),
    };
    let listener: Listener;
    if (spec.ssl) {
      if (!tls) throw new Error(`listener ${spec.text} needs TLS material`);
      // A client that opens a connection and never finishes the handshake is dropped like an idle one.
      const tlsOptions = {
        key: tls.key,
        cert: tls.cert,
        handshakeTimeout: Math.min(limits.clientTimeout, 120_000),
        SNICallback: sniCallback(tls),
      };
      const server = spec.http2
        ? http2.createSecureServer(
            { ...h2Options, ...tlsOptions, allowHTTP1: true, ...http1Options } as http2.SecureServerOptions,
            handlers.request,
          )
        : https.createServer({ ...http1Options, ...tlsOptions }, handlers.request);
      listener = new Listener(
        spec,
        server,
        spec.http2 ? undefined : (server as http.Server),
        spec.http2 ? (server as http2.Http2SecureServer) : undefined,
        events,
      );
      if (handlers.upgrade) server.on('upgrade', handlers.upgrade);
      server.on('tlsClientError', (_err: Error, socket: Socket) => socket.destroy());
      timeouts.watch(server, { http1: true });
      if (!spec.http2) listener.guardHttp1(server as http.Server);
      else listener.guardHttp2(server as http2.Http2SecureServer);
    } else if (spec.http2) {
      const http1 = http.createServer(http1Options, handlers.request);
      timeouts.watch(http1, { http1: true });
      // This server never listens (the sniffer hands it sockets), and 'listening' is what starts Node's
      // connection tracking: without it no headersTimeout checks and closeIdleConnections() does nothing.
      http1.emit('listening');
      const h2 = http2.createServer(h2Options, handlers.request);
      timeouts.watch(h2, { http1: false });
      if (handlers.upgrade) http1.on('upgrade', handlers.upgrade);
      const server = net.createServer((socket) => sniffProtocol(socket, http1, h2, limits.clientTimeout, events));
      listener = new Listener(spec, server, http1, h2, events);
      listener.guardHttp1(http1);
      listener.guardHttp2(h2);
    } else {
      const server = http.createServer(http1Options, handlers.request);
      if (handlers.upgrade) server.on('upgrade', handlers.upgrade);
      timeouts.watch(server, { http1: true });
      listener = new Listener(spec, server, server, undefined, events);
      listener.guardHttp1(server);
    }
    await new Promise<void>((resolve, reject) => {
      listener.server.once('error', reject);
      listener.server.listen(spec.port, spec.host, () => {
        listener.server.off('error', reject);
        resolve();
      });
    });
    return listener;
  }

  /** Malformed requests and oversized headers get a clear answer, never a crash. */
  private guardHttp1(server: http.Server): void {
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      if (!socket.writable) return socket.destroy();
      if (err.code === 'HPE_HEADER_OVERFLOW') return refuse(socket, 431, HEADERS_TOO_LARGE);
      if (err.code === 'HPE_INVALID_VERSION') return refuse(socket, 505, VERSION_NOT_SUPPORTED);
      if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return refuse(socket, 408, 'Request Timeout');
      refuse(socket, 400, 'Bad Request');
    });
    refuseConnect(server);
  }

  private guardHttp2(server: http2.Http2Server | http2.Http2SecureServer): void {
    server.on('sessionError', () => {});
    refuseConnect(server as net.Server);
  }

  /** Stops accepting; open connections keep being served. */
  stopAccepting(): Promise<void> {
    // The sniffed HTTP/1.1 server of an h2c port: stops its connection tracking timer.
    if (this.http1 && this.http1 !== (this.server as unknown)) this.http1.close();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Closes idle keep-alive connections and asks HTTP/2 clients to go away gracefully. */
  closeIdle(): void {
    const s = this.server as http.Server;
    if (typeof s.closeIdleConnections === 'function') s.closeIdleConnections();
    this.http1?.closeIdleConnections();
    for (const session of this.sessions) session.close();
  }

  get openConnections(): number {
    return this.sockets.size;
  }

  destroyAll(): void {
    for (const session of this.sessions) session.destroy();
    for (const socket of this.sockets) socket.destroy();
  }
}

/**
 * Reads the first bytes of a plaintext connection: the HTTP/2 preface goes to the h2c server,
 * anything else to the HTTP/1.1 server. Both get the socket itself with the bytes put back: Node's
 * http2 server reads what is already buffered on it (nodejs/node#35475), so the session runs on the
 * native socket (its peer address, no Nagle, no JS stream in between).
 */
function sniffProtocol(socket: Socket, http1: http.Server, h2: http2.Http2Server, clientTimeout: number, events: ConnectionEvents): void {
  socket.on('error', () => socket.destroy());
  // A client that never says which protocol it speaks is not kept forever (the servers' own timeouts start after).
  const giveUp = () => socket.destroy();
  socket.setTimeout(clientTimeout, giveUp);
  let seen = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    seen = Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, H2_PREFACE.length);
    const looksH2 = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
    if (looksH2 && seen.length < H2_PREFACE.length) return; // need more bytes to decide
    socket.off('data', onData);
    socket.pause();
    // Listener too: the server taking the socket arms a timeout of its own, which must not call this one.
    socket.setTimeout(0);
    socket.off('timeout', giveUp);
    socket.unshift(seen);
    try {
      if (looksH2) {
        h2.emit('connection', socket);
      } else {
        http1.emit('connection', socket);
        socket.resume();
      }
    } catch (err) {
      events.failed(err);
      socket.destroy();
    }
  };
  socket.on('data', onData);
}
