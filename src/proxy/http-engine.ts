/**
 * The HTTP/1.1 upstream client: the one module that talks to http/https upstreams, so it can be
 * swapped for another client if measurements call for it.
 *
 * Built directly on node:http with keep-alive agents (one pool per upstream and TLS settings), with
 * Kong's per-operation timeouts told apart from resets (504 vs 502), and retries on connection
 * failures when the request body can be sent again.
 */
import http, { type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { Readable } from 'node:stream';
import type { Service } from '../config/types.ts';
import { failureKind, type FailureKind } from './respond.ts';

export type { FailureKind };

export class UpstreamFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly tries: number,
    /**
     * Where it failed: `connect` (refused, DNS, connect timeout: nothing was sent), `stale` (a reused
     * keep-alive socket the upstream had closed under us), or `exchange` (after the request went out).
     */
    readonly stage: 'connect' | 'stale' | 'exchange' = 'exchange',
  ) {
    super(message);
  }
}

export interface ForwardRequest {
  service: Service;
  method: string;
  /** Path and query. */
  path: string;
  headers: OutgoingHttpHeaders;
  /** A buffered body can be re-sent on a retry; a stream cannot. */
  body: Buffer | Readable | null;
}

export interface ForwardHandlers {
  /** Response headers arrived (first byte); the caller consumes `res`. */
  onResponse(res: IncomingMessage, upstreamRequest: ClientRequest): void;
  onFailure(failure: UpstreamFailure): void;
}

class TimeoutError extends Error {}
class ConnectTimeoutError extends TimeoutError {}

export interface EngineOptions {
  /** Idle keep-alive connections kept per upstream. */
  poolSize: number;
  /** Seconds an idle upstream connection is kept. */
  idleTimeoutSec: number;
}

export class HttpEngine {
  private readonly agents = new Map<string, http.Agent>();

  constructor(private readonly options: EngineOptions) {}

  /** Sends the request, retrying connection failures up to `service.retries` times when possible. */
  forward(request: ForwardRequest, handlers: ForwardHandlers): { abort(): void } {
    let current: ClientRequest | undefined;
    let aborted = false;
    const attempt = (tryNumber: number) => {
      current = this.send(request, {
        onResponse: handlers.onResponse,
        onFailure: (failure) => {
          // The caller gave up on this request (client gone, body refused): it has answered already.
          if (aborted) return;
          // A streamed body is piped only once connected: after a connect failure it is still unread.
          const replayable = request.body === null || Buffer.isBuffer(request.body) || failure.stage === 'connect';
          const retryable = failure.stage !== 'exchange';
          if (replayable && retryable && tryNumber < request.service.retries) attempt(tryNumber + 1);
          else handlers.onFailure(new UpstreamFailure(failure.kind, failure.message, tryNumber + 1, failure.stage));
        },
      });
    };
    attempt(0);
    return {
      abort: () => {
        aborted = true;
        current?.destroy();
      },
    };
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  private agentFor(service: Service): http.Agent {
    const tls = service.protocol === 'https' || service.protocol === 'wss';
    const key = `${tls ? 's' : 'p'}|${service.host}|${service.port}|${service.tls_verify ?? false}`;
    let agent = this.agents.get(key);
    if (!agent) {
      const common = {
        keepAlive: true,
        maxFreeSockets: this.options.poolSize,
        timeout: this.options.idleTimeoutSec * 1000,
        scheduling: 'lifo' as const,
      };
      agent = tls
        ? new https.Agent({ ...common, rejectUnauthorized: service.tls_verify ?? false, servername: isIP(service.host) ? undefined : service.host })
        : new http.Agent(common);
      this.agents.set(key, agent);
    }
    return agent;
  }

  /** One try; a failure says at which stage it happened, which decides whether a retry is safe. */
  private send(request: ForwardRequest, handlers: ForwardHandlers): ClientRequest {
    const { service } = request;
    const tls = service.protocol === 'https' || service.protocol === 'wss';
    const upstream = (tls ? https : http).request({
      host: service.host,
      port: service.port,
      method: request.method,
      path: request.path,
      headers: request.headers,
      agent: this.agentFor(service),
      setHost: false,
    });
    let settled = false;
    const fail = (err: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      const kind = failureKind(err, err instanceof TimeoutError);
      const stage =
        kind === 'connect' || kind === 'dns' || err instanceof ConnectTimeoutError ? 'connect'
        : upstream.reusedSocket && err.code === 'ECONNRESET' ? 'stale'
        : 'exchange';
      handlers.onFailure(new UpstreamFailure(kind, err.message, 1, stage));
    };
    upstream.on('error', fail);
    upstream.on('socket', (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(() => upstream.destroy(new ConnectTimeoutError('connect timeout')), service.connect_timeout);
      socket.once('connect', () => clearTimeout(timer));
      socket.once('close', () => clearTimeout(timer));
    });
    upstream.setTimeout(service.write_timeout, () => upstream.destroy(new TimeoutError('write or read timeout')));
    if (service.read_timeout !== service.write_timeout) upstream.on('finish', () => upstream.setTimeout(service.read_timeout));
    upstream.on('response', (res) => {
      if (settled) return res.resume();
      settled = true;
      handlers.onResponse(res, upstream);
    });
    const body = request.body;
    if (body === null) upstream.end();
    else if (Buffer.isBuffer(body)) upstream.end(body);
    else {
      body.pause();
      upstream.once('socket', (socket) => (socket.connecting ? socket.once('connect', () => body.pipe(upstream)) : body.pipe(upstream)));
    }
    return upstream;
  }
}
