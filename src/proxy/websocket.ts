/**
 * WebSocket tunnels. The handshake has been routed and has passed the plugins (an auth failure was
 * answered with a plain HTTP 401 before this runs); it is sent to the upstream, and:
 * - before a 101 the client gets ordinary HTTP answers: the upstream's own refusal relayed, or
 *   502/503/504 when it cannot be reached or does not answer in time;
 * - after the upstream's 101 is relayed, the two sockets are joined and bytes flow untouched both
 *   ways (frames, fragments, ping/pong, close codes, extensions negotiated end to end);
 * - whichever side goes away, the other socket is destroyed too, so no socket outlives its tunnel
 *   (node-http-proxy's leaks, issues #1510 and #1586).
 */
import http, { type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Peer, PeerSource } from '../balancer/peers.ts';
import type { Service } from '../config/types.ts';
import { UpstreamTimeoutError } from '../errors.ts';
import type { UpstreamTls } from '../tls/upstream-tls.ts';
import { contained, type ExchangeHandlers } from './exchange.ts';
import { downstreamHeaders, headerLines } from './headers.ts';
import { failureKind, upstreamFailureAnswer } from './respond.ts';

/** Services an upgrade can be proxied to (Kong OSS tunnels WebSockets over http/https services). */
const UPGRADABLE = new Set(['http', 'https', 'ws', 'wss']);

/** After one side half-closes, how long the other gets to finish its close before both are destroyed. */
const HALF_CLOSE_GRACE_MS = 10_000;
/** TCP keep-alive probes find peers that vanished without a FIN. */
const KEEPALIVE_DELAY_MS = 60_000;

/** A handshake to send upstream, and the client's connection to join to the upstream's. */
export interface WebSocketRequest {
  /** Protocol, timeouts and retries. */
  service: Service;
  /** Where each try goes (a balancer's targets, or the service's own host and port). */
  peers: PeerSource;
  /** TLS towards an https or wss service. */
  tls?: UpstreamTls;
  /** Each try carries its peer's Host (false: the client's, preserve_host). */
  hostPerPeer: boolean;
  /** Path and query. */
  path: string;
  headers: OutgoingHttpHeaders;
  /** The client's connection, and the bytes it sent after its handshake. */
  socket: Duplex;
  head: Buffer;
}

export interface WebSocketHandlers extends ExchangeHandlers {
  /** The tunnel closed, having carried these bytes of frames each way (the access log's body bytes). */
  onTunnelClosed(bytes: { fromClient: number; toClient: number }): void;
}

export class WebSocketProxy {
  /** Upstream sockets of open tunnels and pending handshakes, destroyed at shutdown. */
  private readonly open = new Set<Duplex>();

  close(): void {
    for (const socket of this.open) socket.destroy();
    this.open.clear();
  }

  proxy(request: WebSocketRequest, handlers: WebSocketHandlers): void {
    const { protocol } = request.service;
    if (!UPGRADABLE.has(protocol)) return handlers.onError(502, `a ${protocol} service cannot take a WebSocket upgrade`);
    // Bytes the client sent after its handshake belong to the tunnel.
    if (request.head.length > 0) request.socket.unshift(request.head);
    this.handshake(request, handlers, request.peers.first, 0);
  }

  /** One try of the handshake on `peer`; a connection failure moves to the next peer, as Kong's retries. */
  private handshake(request: WebSocketRequest, handlers: WebSocketHandlers, peer: Peer, tries: number): void {
    const { service, socket, headers } = request;
    const tls = service.protocol === 'https' || service.protocol === 'wss';
    const sentAt = performance.now();
    const ownHost = request.hostPerPeer && headers.host !== peer.hostHeader ? { ...headers, host: peer.hostHeader } : headers;
    const upstreamRequest = (tls ? https : http).request({
      host: peer.host,
      port: peer.port,
      method: 'GET',
      path: request.path,
      headers: ownHost,
      setHost: false,
      agent: false,
      rejectUnauthorized: false,
      ...(tls ? { servername: peer.servername, ...request.tls?.options } : {}),
    });
    const onClientGone = () => upstreamRequest.destroy();
    socket.once('close', onClientGone);
    /** Connected: the handshake went out, a failure from then on is not retried on another peer. */
    let connected = false;
    upstreamRequest.on(
      'socket',
      contained(handlers, (upstreamSocket: Socket) => {
        this.track(upstreamSocket);
        if (!upstreamSocket.connecting) return void (connected = true);
        const timer = setTimeout(() => upstreamRequest.destroy(new UpstreamTimeoutError('connect timeout')), service.connect_timeout);
        upstreamSocket.once('connect', () => {
          connected = true;
          clearTimeout(timer);
        });
        upstreamSocket.once('close', () => clearTimeout(timer));
      }),
    );
    upstreamRequest.setTimeout(service.read_timeout, () => upstreamRequest.destroy(new UpstreamTimeoutError('handshake timeout')));
    /** The upstream answered (refusal or 101): from then on a failure can only close the socket. */
    let answered = false;
    upstreamRequest.on(
      'error',
      contained(handlers, (err: NodeJS.ErrnoException) => {
        if (answered) return void socket.destroy();
        socket.off('close', onClientGone);
        const timedOut = err instanceof UpstreamTimeoutError;
        request.peers.failed(failureKind(err, timedOut));
        const next = !connected && !socket.destroyed && tries < service.retries ? request.peers.next() : null;
        if (next) return this.handshake(request, handlers, next, tries + 1);
        const [status, message] = upstreamFailureAnswer(err, timedOut);
        handlers.onError(status, message, err);
      }),
    );
    upstreamRequest.on(
      'response',
      contained(handlers, (res: IncomingMessage) => {
        answered = true;
        const latency = performance.now() - sentAt;
        request.peers.answered(res.statusCode ?? 0, latency);
        handlers.onUpstreamLatency(latency);
        relayRefusal(handlers, socket, res, sentAt);
      }),
    );
    upstreamRequest.on(
      'upgrade',
      contained(handlers, (res: IncomingMessage, upstreamSocket: Socket, upstreamHead: Buffer) => {
        answered = true;
        const latency = performance.now() - sentAt;
        request.peers.answered(res.statusCode ?? 101, latency);
        socket.off('close', onClientGone);
        handlers.onUpstreamLatency(latency);
        if (socket.destroyed) return upstreamSocket.destroy();
        // Whatever fails from here on, the upstream socket must not outlive the client's.
        socket.once('close', () => upstreamSocket.destroy());
        upstreamSocket.setTimeout(0);
        // A keep-alive connection may have carried requests before this one: only the tunnel counts.
        const client = socket as Socket;
        const readBefore = client.bytesRead;
        socket.write(handshakeHead(handlers, res, sentAt));
        const writtenBefore = client.bytesWritten;
        handlers.onResponseSent(101);
        if (upstreamHead.length > 0) socket.write(upstreamHead);
        join(socket, upstreamSocket, () =>
          handlers.onTunnelClosed({
            fromClient: (client.bytesRead ?? readBefore) - readBefore,
            toClient: (client.bytesWritten ?? writtenBefore) - writtenBefore,
          }),
        );
      }),
    );
    upstreamRequest.end();
  }

  private track(socket: Duplex): void {
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
  }
}

/** The upstream's 101, relayed with Kong's Via and latency headers and the Upgrade kept. */
function handshakeHead(handlers: ExchangeHandlers, res: IncomingMessage, sentAt: number): string {
  const out = downstreamHeaders(res.headers, undefined, false);
  out.connection = 'Upgrade';
  out.upgrade = res.headers.upgrade ?? 'websocket';
  handlers.onResponseHead(101, out, sentAt);
  return statusLine(101, res.statusMessage || 'Switching Protocols') + headerLines(out);
}

/** The upstream answered the handshake without upgrading: the client gets that answer, then the socket closes. */
function relayRefusal(handlers: ExchangeHandlers, socket: Duplex, res: IncomingMessage, sentAt: number): void {
  const status = res.statusCode ?? 502;
  const out = downstreamHeaders(res.headers, undefined, false);
  handlers.onResponseHead(status, out, sentAt);
  out.connection = 'close';
  socket.write(statusLine(status, res.statusMessage ?? '') + headerLines(out));
  handlers.onResponseSent(status);
  res.pipe(socket);
}

function statusLine(status: number, text: string): string {
  return `HTTP/1.1 ${status} ${text}\r\n`;
}

/** Joins the two sockets; when either closes or fails, both are destroyed and `done` runs once. */
function join(client: Duplex, upstream: Socket, done: () => void): void {
  for (const s of [client as Socket, upstream]) {
    s.setNoDelay?.(true);
    s.setKeepAlive?.(true, KEEPALIVE_DELAY_MS);
  }
  let graceTimer: NodeJS.Timeout | undefined;
  let closed = false;
  const destroyBoth = () => {
    client.destroy();
    upstream.destroy();
    clearTimeout(graceTimer);
    if (!closed) {
      closed = true;
      done();
    }
  };
  const onHalfClose = () => {
    graceTimer ??= setTimeout(destroyBoth, HALF_CLOSE_GRACE_MS).unref();
  };
  for (const s of [client, upstream]) {
    s.on('error', destroyBoth);
    s.once('close', destroyBoth);
    s.once('end', onHalfClose);
  }
  client.pipe(upstream);
  upstream.pipe(client);
}
