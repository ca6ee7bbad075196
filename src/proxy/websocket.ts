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
import type { Peer } from '../balancer/peers.ts';
import { headerLines, type Context } from '../pipeline/context.ts';
import type { Destination, ProxyEnd } from '../pipeline/lifecycle.ts';
import { finishResponseHeaders } from '../pipeline/response-phase.ts';
import { contained } from './exchange.ts';
import { downstreamHeaders } from './headers.ts';
import { failureKind, upstreamFailureAnswer } from './respond.ts';

/** Services an upgrade can be proxied to (Kong OSS tunnels WebSockets over http/https services). */
const UPGRADABLE = new Set(['http', 'https', 'ws', 'wss']);

/** After one side half-closes, how long the other gets to finish its close before both are destroyed. */
const HALF_CLOSE_GRACE_MS = 10_000;
/** TCP keep-alive probes find peers that vanished without a FIN. */
const KEEPALIVE_DELAY_MS = 60_000;

class HandshakeTimeout extends Error {}

export class WebSocketProxy {
  /** Upstream sockets of open tunnels and pending handshakes, destroyed at shutdown. */
  private readonly open = new Set<Duplex>();

  close(): void {
    for (const socket of this.open) socket.destroy();
    this.open.clear();
  }

  proxy(ctx: Context, socket: Duplex, head: Buffer, headers: Record<string, unknown>, destination: Destination, end: ProxyEnd): void {
    const service = ctx.service!;
    if (!UPGRADABLE.has(service.protocol)) return answerError(ctx, 502, `a ${service.protocol} service cannot take a WebSocket upgrade`);
    // Bytes the client sent after its handshake belong to the tunnel.
    if (head.length > 0) socket.unshift(head);
    this.handshake(ctx, socket, headers, destination, destination.peers.first, 0, end);
  }

  /** One try of the handshake on `peer`; a connection failure moves to the next peer, as Kong's retries. */
  private handshake(ctx: Context, socket: Duplex, headers: Record<string, unknown>, destination: Destination, peer: Peer, tries: number, end: ProxyEnd): void {
    const service = ctx.service!;
    const tls = service.protocol === 'https' || service.protocol === 'wss';
    const sentAt = performance.now();
    const ownHost = !ctx.route.preserve_host && headers.host !== peer.hostHeader ? { ...headers, host: peer.hostHeader } : headers;
    const upstreamRequest = (tls ? https : http).request({
      host: peer.host,
      port: peer.port,
      method: 'GET',
      path: ctx.upstreamTarget(),
      headers: ownHost as OutgoingHttpHeaders,
      setHost: false,
      agent: false,
      rejectUnauthorized: false,
      ...(tls ? { servername: peer.servername, ...destination.tls?.options } : {}),
    });
    const onClientGone = () => upstreamRequest.destroy();
    socket.once('close', onClientGone);
    /** Connected: the handshake went out, a failure from then on is not retried on another peer. */
    let connected = false;
    upstreamRequest.on(
      'socket',
      contained(end, (upstreamSocket: Socket) => {
        this.track(upstreamSocket);
        if (!upstreamSocket.connecting) return void (connected = true);
        const timer = setTimeout(() => upstreamRequest.destroy(new HandshakeTimeout('connect timeout')), service.connect_timeout);
        upstreamSocket.once('connect', () => {
          connected = true;
          clearTimeout(timer);
        });
        upstreamSocket.once('close', () => clearTimeout(timer));
      }),
    );
    upstreamRequest.setTimeout(service.read_timeout, () => upstreamRequest.destroy(new HandshakeTimeout('handshake timeout')));
    /** The upstream answered (refusal or 101): from then on a failure can only close the socket. */
    let answered = false;
    upstreamRequest.on(
      'error',
      contained(end, (err: NodeJS.ErrnoException) => {
        if (answered) return void socket.destroy();
        socket.off('close', onClientGone);
        const timedOut = err instanceof HandshakeTimeout;
        destination.peers.failed(failureKind(err, timedOut));
        const next = !connected && !socket.destroyed && tries < service.retries ? destination.peers.next() : null;
        if (next) return this.handshake(ctx, socket, headers, destination, next, tries + 1, end);
        const [status, message] = upstreamFailureAnswer(err, timedOut);
        answerError(ctx, status, message);
      }),
    );
    upstreamRequest.on(
      'response',
      contained(end, (res: IncomingMessage) => {
        answered = true;
        destination.peers.answered(res.statusCode ?? 0, performance.now() - sentAt);
        ctx.upstreamLatency = Math.round(performance.now() - sentAt);
        relayRefusal(ctx, socket, res, sentAt);
      }),
    );
    upstreamRequest.on(
      'upgrade',
      contained(end, (res: IncomingMessage, upstreamSocket: Socket, upstreamHead: Buffer) => {
        answered = true;
        destination.peers.answered(res.statusCode ?? 101, performance.now() - sentAt);
        socket.off('close', onClientGone);
        ctx.upstreamLatency = Math.round(performance.now() - sentAt);
        if (socket.destroyed) return upstreamSocket.destroy();
        // Whatever fails from here on, the upstream socket must not outlive the client's.
        socket.once('close', () => upstreamSocket.destroy());
        upstreamSocket.setTimeout(0);
        // A keep-alive connection may have carried requests before this one: only the tunnel counts.
        const readBefore = (socket as Socket).bytesRead;
        socket.write(handshakeHead(ctx, res, sentAt));
        const writtenBefore = (socket as Socket).bytesWritten;
        if (upstreamHead.length > 0) socket.write(upstreamHead);
        join(socket, upstreamSocket, () => {
          countTunnelBytes(ctx, socket as Socket, readBefore, writtenBefore);
          end.done();
        });
      }),
    );
    upstreamRequest.end();
  }

  private track(socket: Duplex): void {
    this.open.add(socket);
    socket.once('close', () => this.open.delete(socket));
  }
}

/** The frames that went through the tunnel each way, for the access log (the client's socket is the tunnel's). */
function countTunnelBytes(ctx: Context, client: Socket, readBefore: number, writtenBefore: number): void {
  ctx.requestBodyBytes = (client.bytesRead ?? readBefore) - readBefore;
  ctx.responseBodyBytes = (client.bytesWritten ?? writtenBefore) - writtenBefore;
}

/** The upstream's 101, relayed with Kong's Via and latency headers and the Upgrade kept. */
function handshakeHead(ctx: Context, res: IncomingMessage, sentAt: number): string {
  const out = downstreamHeaders(res.headers, undefined, false);
  out.connection = 'Upgrade';
  out.upgrade = res.headers.upgrade ?? 'websocket';
  finishResponseHeaders(ctx, 101, out, sentAt);
  ctx.status = 101;
  return statusLine(101, res.statusMessage || 'Switching Protocols') + headerLines(out);
}

/** The upstream answered the handshake without upgrading: the client gets that answer, then the socket closes. */
function relayRefusal(ctx: Context, socket: Duplex, res: IncomingMessage, sentAt: number): void {
  const status = res.statusCode ?? 502;
  const out = downstreamHeaders(res.headers, undefined, false);
  finishResponseHeaders(ctx, status, out, sentAt);
  out.connection = 'close';
  ctx.status = status;
  socket.write(statusLine(status, res.statusMessage ?? '') + headerLines(out));
  res.pipe(socket);
}

/** Answers before any upgrade (the lifecycle marked the handshake as upgrading; that did not happen). */
function answerError(ctx: Context, status: number, message: string): void {
  ctx.status = 0;
  ctx.error(status, message);
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
