/**
 * How long a client may hold a connection without doing its part, as Kong's nginx bounds it with
 * client_header_timeout, client_body_timeout and send_timeout (each between two reads or writes) and
 * keepalive_timeout: here all `client_timeout`.
 *
 * A connection quiet for that long is judged by what it waits for: nothing (idle, or headers never
 * finished) → closed; a request body the client stopped sending → 408, then closed; an answer the
 * client stopped reading → closed. A request waiting on its upstream or a plugin, a long upload that
 * keeps moving, a stream that is quiet between events: not the client's doing, left alone (the
 * upstream's timeouts bound those).
 */
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import type { Duplex } from 'node:stream';

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

interface Exchange {
  req: Request;
  res: Response;
}

/** Kong's client_header_timeout default: a longer client_timeout does not make slow headers welcome. */
const MAX_HEADERS_TIMEOUT_MS = 60_000;
/**
 * Node checks header deadlines on a timer (30 s by default, far past a short client_timeout): a
 * quarter of the deadline keeps it within 25%, at most every 250 ms.
 */
const MIN_CHECK_INTERVAL_MS = 250;

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;

export class ClientTimeouts {
  /** Requests in progress per HTTP/1 socket or h2 session. */
  private readonly exchanges = new WeakMap<object, Set<Exchange>>();

  constructor(
    private readonly clientTimeout: number,
    /** Answers 408 on a response whose headers have not gone out (the listener's JSON answer). */
    private readonly answerTimeout: (res: Response) => void,
  ) {}

  /** Node's own HTTP/1 deadlines, set as properties: Http2SecureServer ignores them as options. */
  get http1Settings(): { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number; connectionsCheckingInterval: number } {
    const headersTimeout = Math.min(this.clientTimeout, MAX_HEADERS_TIMEOUT_MS);
    return {
      headersTimeout,
      // No deadline for the whole request: a long upload is fine while it moves.
      requestTimeout: 0,
      keepAliveTimeout: this.clientTimeout,
      connectionsCheckingInterval: Math.max(MIN_CHECK_INTERVAL_MS, Math.min(30_000, headersTimeout / 4)),
    };
  }

  /**
   * Watches a server's connections: HTTP/1 sockets (when `http1`, Node's own HTTP/1 deadlines too), h2
   * sessions and their streams. Call before it listens.
   */
  watch(server: http.Server | http2.Http2Server | http2.Http2SecureServer, { http1 }: { http1: boolean }): void {
    if (http1) Object.assign(server, this.http1Settings);
    server.on('request', (req: Request, res: Response) => this.track(req, res));
    server.setTimeout(this.clientTimeout, (target?: net.Socket | http2.Http2Session) => {
      if (target instanceof net.Socket) this.socketQuiet(target);
      else if (target) this.sessionQuiet(target, server);
    });
  }

  /** An upgraded socket (a WebSocket tunnel) is the client's to keep open, but not to stop reading. */
  upgraded(socket: Duplex): void {
    (socket as net.Socket).setTimeout?.(this.clientTimeout, () => {
      if (socket.writableLength > 0) socket.destroy();
    });
  }

  private track(req: Request, res: Response): void {
    const owner = req instanceof http2.Http2ServerRequest ? req.stream.session : req.socket;
    if (!owner) return;
    let open = this.exchanges.get(owner);
    if (!open) this.exchanges.set(owner, (open = new Set()));
    const exchange = { req, res };
    open.add(exchange);
    res.once('close', () => open.delete(exchange));
    if (req instanceof http2.Http2ServerRequest)
      req.stream.setTimeout(this.clientTimeout, () =>
        this.streamQuiet(exchange as { req: http2.Http2ServerRequest; res: http2.Http2ServerResponse }),
      );
  }

  private socketQuiet(socket: net.Socket): void {
    const open = this.exchanges.get(socket);
    if (!open || open.size === 0) return void socket.destroy();
    for (const exchange of open) {
      // After the 408 (Connection: close) Node ends the connection itself, gracefully: a reset could make
      // the client's kernel drop the answer before it is read.
      if (owesBody(exchange.req)) return this.bodyTimedOut(exchange, () => socket.destroy());
    }
    // Bytes the kernel would not take: the client stopped reading its answer.
    if (socket.writableLength > 0) socket.destroy();
  }

  private streamQuiet(exchange: { req: http2.Http2ServerRequest; res: http2.Http2ServerResponse }): void {
    const { stream } = exchange.req;
    if (stream.destroyed) return;
    // RFC 9113 §8.1: after a complete answer, RST_STREAM(NO_ERROR) asks the client to stop sending the body.
    if (owesBody(exchange.req)) return this.bodyTimedOut(exchange, () => stream.close(NGHTTP2_CANCEL), () => stream.close(NGHTTP2_NO_ERROR));
    if (stream.writableLength > 0) stream.close(NGHTTP2_CANCEL);
  }

  /** A session with streams in progress is not idle; Node arms its timeout callback once, so it is armed again. */
  private sessionQuiet(session: http2.Http2Session, server: net.Server): void {
    const open = this.exchanges.get(session);
    if (!open || open.size === 0) return void session.destroy();
    session.setTimeout(this.clientTimeout, () => server.emit('timeout', session));
  }

  /** 408 when nothing was answered yet (`answered` runs once it is out), else the exchange is cut off. */
  private bodyTimedOut(exchange: Exchange, cutOff: () => void, answered?: () => void): void {
    if (exchange.res.headersSent) return cutOff();
    this.answerTimeout(exchange.res);
    if (answered) exchange.res.once('finish', answered);
  }
}

/** The request body is not all in, and nothing of it waits to be read: the client has stopped sending. */
function owesBody(req: Request): boolean {
  if (req instanceof http2.Http2ServerRequest) {
    // The client ended its side (END_STREAM), whether or not anyone read the body.
    const { stream } = req;
    if (stream.endAfterHeaders || stream.state.remoteClose) return false;
    return req.readableLength + stream.readableLength === 0;
  }
  return !req.complete && req.readableLength === 0;
}
