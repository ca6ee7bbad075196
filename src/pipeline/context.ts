/** The per-request context handed to plugins: request facts, upstream edits, and ways to answer. */
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import type { PeerSource } from '../balancer/peers.ts';
import type { Consumer, PluginEntity, Route, Service } from '../config/types.ts';
import type { RouteMatch } from '../router/index.ts';
import type { Snapshot } from '../runtime.ts';
import { errorAnswer, MESSAGES, pluginAnswer, SERVER_TOKEN, type Answer } from '../proxy/respond.ts';
import { HttpError, type AuthenticatedCredential, type PluginRuntime, type RequestContext } from './plugin-api.ts';

/** A plugin whose phases run on this request. */
export interface RanPlugin {
  runtime: PluginRuntime;
  plugin: PluginEntity;
}

export type DownstreamRequest = IncomingMessage | Http2ServerRequest;
export type DownstreamResponse = ServerResponse | Http2ServerResponse;

/** Where the gateway's own answers go: an HTTP response, or the raw socket of an upgrade request. */
export interface Downstream {
  send(answer: Answer, headOnly: boolean): void;
  readonly headersSent: boolean;
}

export class ResponseDownstream implements Downstream {
  constructor(readonly res: DownstreamResponse) {}
  get headersSent(): boolean {
    return this.res.headersSent;
  }
  send(answer: Answer, headOnly: boolean): void {
    const res = this.res as ServerResponse;
    if (res.headersSent || res.destroyed) return;
    const stream = (this.res as Http2ServerResponse).stream;
    if (stream && (headOnly || answer.body.length === 0)) {
      // One HEADERS frame with END_STREAM: for gRPC this is the trailers-only response whose
      // grpc-status and grpc-message clients read (headers + an empty DATA frame would lose them).
      if (!stream.destroyed) stream.respond({ ...answer.headers, ':status': answer.status }, { endStream: true });
      return;
    }
    res.writeHead(answer.status, answer.headers);
    res.end(headOnly ? undefined : answer.body);
  }
}

/** Answers an upgrade request on its socket (there is no ServerResponse for those), then closes it. */
export class SocketDownstream implements Downstream {
  private sent = false;
  constructor(readonly socket: Duplex) {}
  get headersSent(): boolean {
    return this.sent;
  }
  send(answer: Answer, headOnly: boolean): void {
    if (this.sent || this.socket.destroyed) return;
    this.sent = true;
    let head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ''}\r\n`;
    for (const [name, value] of Object.entries({ ...answer.headers, connection: 'close' })) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) head += `${name}: ${v}\r\n`;
    }
    this.socket.end(Buffer.concat([Buffer.from(head + '\r\n'), headOnly ? Buffer.alloc(0) : answer.body]));
  }
}

export interface ContextInit {
  id: string;
  startedAt: number;
  scheme: 'http' | 'https';
  forwardedProto: string;
  httpVersion: '1.1' | '2';
  isGrpc: boolean;
  isUpgrade: boolean;
  method: string;
  path: string;
  rawQuery: string;
  headers: IncomingHttpHeaders;
  host: string;
  clientIp: string;
  route: Route;
  service: Service | null;
  matchedPrefix: string;
  req: DownstreamRequest;
  res: DownstreamResponse | null;
  downstream: Downstream;
  maxBodySize: number;
  match: RouteMatch;
  snapshot: Snapshot;
  rawPath: string;
  rawHost: string;
  peerIp: string;
  trusted: boolean;
}

export class Context implements RequestContext {
  readonly id: string;
  readonly startedAt: number;
  readonly scheme: 'http' | 'https';
  readonly forwardedProto: string;
  readonly httpVersion: '1.1' | '2';
  readonly isGrpc: boolean;
  readonly isUpgrade: boolean;
  readonly method: string;
  readonly path: string;
  readonly rawQuery: string;
  readonly headers: IncomingHttpHeaders;
  readonly host: string;
  readonly clientIp: string;
  readonly route: Route;
  readonly service: Service | null;
  readonly matchedPrefix: string;
  readonly downstream: Downstream;
  readonly raw: { req: DownstreamRequest; res: DownstreamResponse };

  consumer: Consumer | null = null;
  credential: AuthenticatedCredential | null = null;
  /** Status sent downstream, for the log phase. */
  status = 0;
  /** Milliseconds spent waiting for the upstream's first byte. */
  upstreamLatency: number | undefined;
  /** Upstream header edits: a value to set, or null to remove. */
  headerEdits: Map<string, string | string[] | null> | undefined;
  upstreamQuery: string;
  /** The body when a plugin read it; then it is proxied from memory. */
  body: Buffer | undefined;
  /** Plugins whose access phase ran, for the response and log phases. */
  ran: RanPlugin[] | undefined;
  /** The log phase ran. */
  logged = false;
  /** Aborts the upstream request, once one is under way. */
  abortUpstream: (() => void) | undefined;
  /** Where the request's tries go, once chosen; released when the request is over. */
  peers: PeerSource | undefined;

  // Facts the core keeps for the upstream request; not part of the plugin API.
  readonly match: RouteMatch;
  readonly snapshot: Snapshot;
  readonly rawPath: string;
  readonly rawHost: string;
  readonly peerIp: string;
  readonly trusted: boolean;

  private sharedData: Record<string, unknown> | undefined;
  private queryParams: URLSearchParams | undefined;
  private bodyPromise: Promise<Buffer> | undefined;
  private readonly maxBodySize: number;

  constructor(init: ContextInit) {
    this.id = init.id;
    this.startedAt = init.startedAt;
    this.scheme = init.scheme;
    this.forwardedProto = init.forwardedProto;
    this.httpVersion = init.httpVersion;
    this.isGrpc = init.isGrpc;
    this.isUpgrade = init.isUpgrade;
    this.method = init.method;
    this.path = init.path;
    this.rawQuery = init.rawQuery;
    this.upstreamQuery = init.rawQuery;
    this.headers = init.headers;
    this.host = init.host;
    this.clientIp = init.clientIp;
    this.route = init.route;
    this.service = init.service;
    this.matchedPrefix = init.matchedPrefix;
    this.downstream = init.downstream;
    this.raw = { req: init.req, res: init.res as DownstreamResponse };
    this.maxBodySize = init.maxBodySize;
    this.match = init.match;
    this.snapshot = init.snapshot;
    this.rawPath = init.rawPath;
    this.rawHost = init.rawHost;
    this.peerIp = init.peerIp;
    this.trusted = init.trusted;
  }

  get shared(): Record<string, unknown> {
    return (this.sharedData ??= {});
  }

  get query(): URLSearchParams {
    return (this.queryParams ??= new URLSearchParams(this.rawQuery));
  }

  get responded(): boolean {
    return this.status !== 0;
  }

  setUpstreamHeader(name: string, value: string | string[]): void {
    (this.headerEdits ??= new Map()).set(name.toLowerCase(), value);
  }

  removeUpstreamHeader(name: string): void {
    (this.headerEdits ??= new Map()).set(name.toLowerCase(), null);
  }

  setUpstreamQuery(query: string): void {
    this.upstreamQuery = query.startsWith('?') ? query.slice(1) : query;
  }

  readBody(): Promise<Buffer> {
    return (this.bodyPromise ??= readWhole(this.raw.req, this.maxBodySize).then((b) => (this.body = b)));
  }

  setUpstreamBody(body: Buffer): void {
    this.body = body;
  }

  respond(status: number, body?: string | Buffer | object, headers: Record<string, string | string[]> = {}): void {
    this.send(pluginAnswer(this.isGrpc, status, body, headers));
  }

  error(status: number, message: string, headers: Record<string, string | string[]> = {}): void {
    this.send(errorAnswer(status, message, this.id, this.isGrpc, headers));
  }

  send(answer: Answer): void {
    if (this.responded) return;
    this.status = answer.status;
    answer.headers['x-kong-response-latency'] = String(Math.round(performance.now() - this.startedAt));
    answer.headers['x-kong-request-id'] = this.id;
    answer.headers.server ??= SERVER_TOKEN;
    this.downstream.send(answer, this.method === 'HEAD');
  }

  /** Answers with the error an exception stands for: its own status, or Kong's 500. */
  fail(err: unknown): void {
    if (err instanceof HttpError) this.error(err.status, err.message, err.headers);
    else this.error(500, MESSAGES.unexpected);
  }
}

/** Reads a request body into memory, refusing more than `limit` bytes (0 = no limit). */
export function readWhole(req: DownstreamRequest, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (limit > 0 && declared > limit) return reject(new HttpError(413, MESSAGES.bodyTooLarge));
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (limit > 0 && size > limit) {
        cleanup();
        req.resume();
        reject(new HttpError(413, MESSAGES.bodyTooLarge));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(new HttpError(400, `could not read the request body: ${err.message}`));
    };
    const onClose = () => {
      if (!(req as IncomingMessage).complete) onError(new Error('client closed the connection'));
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

export type { OutgoingHttpHeaders };
