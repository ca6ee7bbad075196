/** The per-request context handed to plugins: request facts, upstream edits, and ways to answer. */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import { Readable, type Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import type { PeerSource } from '../balancer/peers.ts';
import type { Consumer, Route, Service } from '../config/types.ts';
import type { Logger } from '../log.ts';
import { escapeUpstreamPath, type RouteMatch } from '../router/index.ts';
import type { Snapshot } from '../snapshot.ts';
import { headerLines } from '../proxy/headers.ts';
import { errorAnswer, MESSAGES, pluginAnswer, SERVER_TOKEN, type Answer } from '../proxy/respond.ts';
import type { AuthenticatedCredential, BodyObserver, BodyTransform, GrpcTranscoder, RequestOutcome, ResponseSource, SerializedRequest } from '../pdk/types.ts';
import type { CoreContext, DownstreamRequest, DownstreamResponse, RanPlugin } from './core-context.ts';
import { answerFor, HttpError } from './http-error.ts';
import { rewriteBody, runResponsePhase, transformWhole } from './response-phase.ts';
import { serializeRequest } from './serialize.ts';
import { checkUpstreamHeader } from './upstream-edits.ts';
import { bodyLimitOf, collect, prepend, readWhole, type BodyHead, type BodyLimit } from './request-body.ts';

/** Where the gateway's own answers go: an HTTP response, or the raw socket of an upgrade request. */
export interface Downstream {
  send(answer: Answer, headOnly: boolean): void;
  readonly headersSent: boolean;
  /** Cuts off an answer that began and cannot be finished; nothing once it is complete. */
  abort(): void;
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
  abort(): void {
    if (!this.res.writableEnded) this.res.destroy();
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
    const head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ''}\r\n` + headerLines({ ...answer.headers, connection: 'close' });
    this.sent = true;
    this.socket.end(Buffer.concat([Buffer.from(head), headOnly ? Buffer.alloc(0) : answer.body]));
  }
  /** An answer of ours was written whole; anything else on the socket (a tunnel, a relayed refusal) is cut. */
  abort(): void {
    if (!this.sent) this.socket.destroy();
  }
}

/** Where a plugin sent the request instead of the service's own host (Kong's set_scheme and set_target). */
export interface UpstreamOrigin {
  protocol: 'http' | 'https';
  host: string;
  port: number;
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
  log: Logger;
}

const NO_CAPTURES: Readonly<Record<string, string>> = Object.freeze({});
const METHOD_TOKEN = /^[A-Z]+$/;

export class Context implements CoreContext {
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
  /** The upstream's status, once it answered. */
  upstreamStatus: number | undefined;
  /** Plugins watching the response body go by (ResponseHead.observeBody); undefined when none. */
  bodyObservers: BodyObserver[] | undefined;
  /** Plugins turning the response body into another as it streams (ResponseHead.transformBody); undefined when none. */
  bodyTransforms: BodyTransform[] | undefined;
  /** Request body bytes received (a WebSocket tunnel's bytes from the client), for the access log. */
  requestBodyBytes = 0;
  /** Response body bytes sent (a WebSocket tunnel's bytes to the client), for the access log. */
  responseBodyBytes = 0;
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
  /** A path and method plugins set for the upstream request instead of the routed ones. */
  upstreamPath: string | undefined;
  upstreamMethod: string | undefined;
  /** Another origin a plugin sent the request to instead of the service's (setUpstreamUrl). */
  upstreamOrigin: UpstreamOrigin | undefined;
  /** Set by sendAsGrpc: the request goes to its gRPC service as one call, its answer transcoded. */
  grpcTranscoder: GrpcTranscoder | undefined;
  /** Headers plugins set for the downstream answer during access (kong.response.set_header). */
  responseHeaders: Record<string, string | string[]> | undefined;
  /** Values plugins add to the access log line and to the serializer's object. */
  logFields: Record<string, unknown> | undefined;
  /** The head that went downstream, for the serializer: a reference, nothing copied. */
  responseHead: OutgoingHttpHeaders | undefined;
  /** What runs after the log phase (afterLog). */
  afterLogCallbacks: (() => void)[] | undefined;
  /** Milliseconds the gateway spent before the upstream request went out, or before its own answer. */
  kongLatency = 0;
  /** The response phase ran (it runs once, on the first answer that goes downstream). */
  responsePhaseRan = false;
  /** Who produced the answer sent downstream. */
  source: ResponseSource = 'service';
  /**
   * True while the access phase runs: an answer given then waits in `delayed` until every plugin of the
   * request has been collected (Kong's delayed response), so that all of them see it in the response and
   * log phases.
   */
  accessRunning = false;
  private delayed: Answer | undefined;

  // Facts the core keeps for the upstream request; not part of the plugin API.
  readonly match: RouteMatch;
  readonly snapshot: Snapshot;
  readonly rawPath: string;
  readonly rawHost: string;
  readonly peerIp: string;
  readonly trusted: boolean;
  readonly log: Logger;

  private sharedData: Record<string, unknown> | undefined;
  private queryParams: URLSearchParams | undefined;
  private bodyPromise: Promise<Buffer> | undefined;
  private headRead: Promise<BodyHead> | undefined;
  /** What readBodyWithin read of a body that proved larger: it goes upstream ahead of the rest. */
  private bodyHead: BodyHead | undefined;
  /** The gateway's client_max_body_size, or less when a plugin lowered it (limitRequestBody). */
  bodyLimit: BodyLimit;

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
    this.bodyLimit = bodyLimitOf(init.maxBodySize);
    this.match = init.match;
    this.snapshot = init.snapshot;
    this.rawPath = init.rawPath;
    this.rawHost = init.rawHost;
    this.peerIp = init.peerIp;
    this.trusted = init.trusted;
    this.log = init.log;
  }

  get uriCaptures(): Readonly<Record<string, string>> {
    return this.match.captures ?? NO_CAPTURES;
  }

  get shared(): Record<string, unknown> {
    return (this.sharedData ??= {});
  }

  get query(): URLSearchParams {
    return (this.queryParams ??= new URLSearchParams(this.rawQuery));
  }

  get serverAddress(): string | undefined {
    return this.raw.req.socket?.localAddress;
  }

  get serverPort(): number | undefined {
    return this.raw.req.socket?.localPort;
  }

  get connection(): object {
    return this.raw.req.socket;
  }

  get responded(): boolean {
    return this.status !== 0;
  }

  get outcome(): RequestOutcome {
    return {
      status: this.status || 499,
      answeredByUpstream: this.upstreamStatus !== undefined && this.source === 'service',
      source: this.source,
      latencies: { request: Math.round(performance.now() - this.startedAt), kong: this.kongLatency, upstream: this.upstreamLatency },
      upstreamStatus: this.upstreamStatus,
      requestBytes: this.requestBodyBytes,
      responseBytes: this.responseBodyBytes,
      // An upgrade has no response object; its tunnel ends as it ends.
      complete: this.status !== 0 && (this.raw.res?.writableEnded ?? true),
    };
  }

  setUpstreamHeader(name: string, value: string | string[]): void {
    const lower = name.toLowerCase();
    checkUpstreamHeader(lower, value);
    (this.headerEdits ??= new Map()).set(lower, value);
  }

  removeUpstreamHeader(name: string): void {
    (this.headerEdits ??= new Map()).set(name.toLowerCase(), null);
  }

  setUpstreamQuery(query: string): void {
    // Escaped as the path is (a query takes the same characters, `?` included): a plugin's query can
    // neither break the request line nor start a fragment.
    this.upstreamQuery = escapeUpstreamPath(query.startsWith('?') ? query.slice(1) : query);
  }

  setUpstreamPath(path: string): void {
    if (!path.startsWith('/')) throw new HttpError(500, 'the upstream path must start with /');
    // Kong escapes what is unsafe in a request line, byte by byte of the UTF-8; `?` too here, so a path
    // can never carry a query.
    this.upstreamPath = escapeUpstreamPath(Buffer.from(path, 'utf8').toString('latin1')).replaceAll('?', '%3F');
  }

  sendAsGrpc(transcode: GrpcTranscoder): void {
    this.grpcTranscoder = transcode;
  }

  setUpstreamUrl(url: URL): void {
    const protocol = url.protocol.slice(0, -1);
    if (protocol !== 'http' && protocol !== 'https') throw new HttpError(500, `the upstream URL must be http or https: ${url.href}`);
    // URL keeps an IPv6 host in brackets; a peer's host is the bare address.
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.upstreamOrigin = { protocol, host, port: url.port === '' ? (protocol === 'https' ? 443 : 80) : Number(url.port) };
    this.setUpstreamPath(url.pathname);
  }

  setUpstreamMethod(method: string): void {
    if (!METHOD_TOKEN.test(method)) throw new HttpError(500, `invalid upstream method: ${method}`);
    this.upstreamMethod = method;
  }

  /** The path and query of the upstream request. */
  upstreamTarget(): string {
    const path = this.upstreamPath ?? this.match.upstreamPath;
    return this.upstreamQuery ? path + '?' + this.upstreamQuery : path;
  }

  setLogValue(name: string, value: unknown): void {
    (this.logFields ??= {})[name] = value;
  }

  serialize(): SerializedRequest {
    return serializeRequest(this);
  }

  afterLog(callback: () => void): void {
    (this.afterLogCallbacks ??= []).push(callback);
  }

  setResponseHeader(name: string, value: string | string[]): void {
    (this.responseHeaders ??= {})[name.toLowerCase()] = value;
  }

  readBody(): Promise<Buffer> {
    return (this.bodyPromise ??= readWhole(this.raw.req, this.bodyLimit, this.bodyHead).then((b) => this.keepBody(b)));
  }

  private keepBody(body: Buffer): Buffer {
    this.requestBodyBytes = body.length;
    return (this.body = body);
  }

  async readBodyWithin(limit: number): Promise<Buffer | undefined> {
    if (this.bodyPromise) {
      const body = await this.bodyPromise;
      return body.length <= limit ? body : undefined;
    }
    // A declared larger body is never read; an undeclared (chunked) one only until it proves larger.
    if (this.bodyHead || Number(this.headers['content-length']) > limit) return undefined;
    const head = await (this.headRead ??= collect(this.raw.req, limit));
    if (!head.ended) {
      this.bodyHead = head;
      return undefined;
    }
    const body = head.chunks.length === 1 ? head.chunks[0] : Buffer.concat(head.chunks, head.size);
    this.bodyPromise = Promise.resolve(body);
    return this.keepBody(body);
  }

  /** The body still to send upstream as a stream: what readBodyWithin read of it, then the rest. */
  unreadBody(): Readable {
    const req = this.raw.req;
    return this.bodyHead ? prepend(this.bodyHead.chunks, req) : req;
  }

  limitRequestBody(bytes: number, status: number): void {
    if (bytes < this.bodyLimit.bytes) this.bodyLimit = { bytes, status };
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

  send(answer: Answer, source: ResponseSource = 'exit'): void {
    if (this.responded) return;
    this.source = source;
    if (!this.accessRunning) return this.deliver(answer);
    // Noted as the answer (the request counts as answered), sent once the access phase is over.
    this.status = answer.status;
    this.delayed = answer;
  }

  /** The access phase is over: the answer it delayed, if any, goes downstream. */
  endAccess(): void {
    this.accessRunning = false;
    const answer = this.delayed;
    if (!answer) return;
    this.delayed = undefined;
    this.status = 0;
    this.deliver(answer);
  }

  private deliver(answer: Answer): void {
    if (this.ran || this.responseHeaders) answer = this.afterResponsePhase(answer);
    // RFC 9110 §8.6: no Content-Length on a 1xx or 204.
    if (answer.status < 200 || answer.status === 204) delete answer.headers['content-length'];
    this.kongLatency = Math.round(performance.now() - this.startedAt);
    answer.headers['x-kong-response-latency'] = String(this.kongLatency);
    answer.headers['x-kong-request-id'] = this.id;
    answer.headers.server ??= SERVER_TOKEN;
    this.responseHead = answer.headers;
    this.responseBodyBytes = this.method === 'HEAD' ? 0 : answer.body.length;
    this.downstream.send(answer, this.method === 'HEAD');
    // Only once it went out: an answer Node refused to write (it threw) leaves the request unanswered.
    this.status = answer.status;
    // A body readBodyWithin left half read is drained unkept (as Node drains one nobody read), or the
    // connection could never carry another request.
    if (this.bodyHead) this.raw.req.resume();
  }

  /**
   * The answer as the response phase leaves it; a plugin failing there (or in a body rewrite) turns it
   * into the 500 of an unexpected error, which goes out without a second response phase.
   */
  private afterResponsePhase(answer: Answer): Answer {
    try {
      const rewrites = runResponsePhase(this, answer.status, answer.headers, this.source, !this.isGrpc && this.method !== 'HEAD');
      if (this.bodyTransforms) answer.body = transformWhole(answer.body, this.bodyTransforms);
      if (rewrites) answer.body = rewriteBody(answer.body, rewrites);
      if (!this.isGrpc) answer.headers['content-length'] = answer.body.length;
      return answer;
    } catch (err) {
      this.log.error({ err, request_id: this.id }, 'plugin response phase failed');
      this.source = 'error';
      return errorAnswer(500, MESSAGES.unexpected, this.id, this.isGrpc);
    }
  }

  /** Answers with the error an exception stands for (answerFor), or Kong's 500. */
  fail(err: unknown): void {
    const answer = answerFor(err);
    if (!answer) return this.send(errorAnswer(500, MESSAGES.unexpected, this.id, this.isGrpc), 'error');
    // The client's or the store's condition, not the gateway's fault: traced at debug, with the error's own
    // code. A flood of refusals must not build a log object each when debug is off.
    if (this.log.isLevelEnabled('debug')) this.log.debug({ request_id: this.id, code: (err as { code?: unknown }).code, status: answer.status }, 'request answered with an error');
    if (answer.bodyless) return this.respond(answer.status, undefined, answer.headers);
    this.error(answer.status, answer.message, answer.headers);
  }
}

export type { OutgoingHttpHeaders };
