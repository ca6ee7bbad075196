/**
 * The response phase (Kong's header_filter and body_filter) over any answer of a matched request: the
 * headers plugins set during access, then each collected plugin's `response`, which may ask to rewrite
 * the body. A rewritten body is read whole first, up to REWRITABLE_BODY_LIMIT; beyond it, the body goes
 * downstream unchanged as it arrives. A plugin failing here fails its request (a 500), as in any phase.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import { Writable } from 'node:stream';
import type { BodyTransform, ResponseHead, ResponseSource } from '../pdk/types.ts';
import type { CoreContext } from './core-context.ts';

export type BodyRewrite = (body: Buffer) => Buffer;

/** The largest response body a plugin may rewrite; larger ones stream through unchanged (and a warning is logged). */
export const REWRITABLE_BODY_LIMIT = 16 * 1024 * 1024;

/**
 * Runs the response phase over an answer's head; returns the body rewrites plugins asked for, if any.
 * `withBody`: a body follows that plugins may rewrite or observe. Throws what a plugin throws.
 */
export function runResponsePhase(
  ctx: CoreContext,
  status: number,
  headers: OutgoingHttpHeaders,
  source: ResponseSource,
  withBody: boolean,
): BodyRewrite[] | undefined {
  // Once per request, as Kong's header_filter: the answer that replaces one Node refused (a 502 for
  // headers a plugin set) must not get the same headers again.
  if (ctx.responsePhaseRan) return undefined;
  ctx.responsePhaseRan = true;
  if (ctx.responseHeaders) Object.assign(headers, ctx.responseHeaders);
  if (!ctx.ran) return undefined;
  let rewrites: BodyRewrite[] | undefined;
  const head: ResponseHead = { status, headers, source };
  if (withBody) {
    head.rewriteBody = (rewrite) => void (rewrites ??= []).push(rewrite);
    head.observeBody = (observe) => void (ctx.bodyObservers ??= []).push(observe);
    head.transformBody = (transform) => void (ctx.bodyTransforms ??= []).push(transform);
  }
  for (const { runtime, plugin } of ctx.ran) runtime.response?.(ctx, plugin.config, head, plugin);
  return rewrites;
}

/** Applies the rewrites in order. Throws what a rewrite throws. */
export function rewriteBody(body: Buffer, rewrites: BodyRewrite[]): Buffer {
  for (const rewrite of rewrites) body = rewrite(body);
  return body;
}

/** A body passed whole through the transforms in order (a gateway's own answer). Throws what a transform throws. */
export function transformWhole(body: Buffer, transforms: BodyTransform[]): Buffer {
  return Buffer.concat([transformChunk(body, transforms), endTransforms(transforms)]);
}

function transformChunk(chunk: Buffer, transforms: BodyTransform[]): Buffer {
  for (const transform of transforms) chunk = transform.write(chunk);
  return chunk;
}

/** What the transforms give at the end: each one's tail goes through the ones after it before they end. */
function endTransforms(transforms: BodyTransform[]): Buffer {
  let out = Buffer.alloc(0);
  for (const transform of transforms) out = Buffer.concat([transform.write(out), transform.end()]);
  return out;
}

/**
 * The last step before a proxied response's headers go downstream (HTTP, gRPC, WebSocket 101):
 * the plugins' response phase, then Kong's latency and request-id headers. Returns the body rewrites
 * the plugins asked for (only when `withBody`: an HTTP body follows, which plugins may also observe).
 */
export function finishResponseHeaders(ctx: CoreContext, status: number, out: OutgoingHttpHeaders, sentAt: number, withBody = false): BodyRewrite[] | undefined {
  ctx.upstreamStatus = status;
  const rewrites = ctx.ran || ctx.responseHeaders ? runResponsePhase(ctx, status, out, 'service', withBody) : undefined;
  out['x-kong-upstream-latency'] = String(ctx.upstreamLatency);
  ctx.kongLatency = Math.round(sentAt - ctx.startedAt);
  out['x-kong-proxy-latency'] = String(ctx.kongLatency);
  out['x-kong-request-id'] = ctx.id;
  ctx.responseHead = out;
  return rewrites;
}

/**
 * Where a proxied body goes when plugins rewrite it: collected, rewritten at its end, then sent with the
 * response head. `writeHead` sends the head (false when Node refuses it; the caller has answered then);
 * `fail` answers a rewrite that threw (nothing has gone downstream yet).
 */
export class RewritingSink extends Writable {
  private chunks: Buffer[] = [];
  private size = 0;
  /** The body proved larger than the limit: it goes on unchanged. */
  private passing = false;

  constructor(
    private readonly ctx: CoreContext,
    private readonly res: ServerResponse | Http2ServerResponse,
    private readonly headers: OutgoingHttpHeaders,
    private readonly upstreamLength: OutgoingHttpHeaders[string],
    private readonly rewrites: BodyRewrite[],
    private readonly writeHead: (headers: OutgoingHttpHeaders) => boolean,
    private readonly fail: (err: unknown) => void,
  ) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.passing) return this.forward(chunk, done);
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size <= REWRITABLE_BODY_LIMIT) return done();
    this.passing = true;
    this.ctx.log.warn({ request_id: this.ctx.id, limit: REWRITABLE_BODY_LIMIT }, 'response body too large to rewrite; sent unchanged');
    this.setLength(this.upstreamLength);
    if (!this.writeHead(this.headers)) return done();
    const held = Buffer.concat(this.chunks, this.size);
    this.chunks = [];
    this.forward(held, done);
  }

  override _final(done: (err?: Error | null) => void): void {
    if (this.passing) {
      this.res.end();
      return done();
    }
    let body: Buffer;
    try {
      body = rewriteBody(Buffer.concat(this.chunks, this.size), this.rewrites);
    } catch (err) {
      this.fail(err);
      return done();
    } finally {
      this.chunks = [];
    }
    this.setLength(body.length);
    if (this.writeHead(this.headers)) this.res.end(body);
    done();
  }

  private setLength(length: OutgoingHttpHeaders[string]): void {
    if (length === undefined) delete this.headers['content-length'];
    else this.headers['content-length'] = Array.isArray(length) ? length[0] : length;
  }

  private forward(chunk: Buffer, done: (err?: Error | null) => void): void {
    if ((this.res as ServerResponse).write(chunk)) done();
    else this.res.once('drain', () => done());
  }
}

/**
 * Where a proxied body goes when plugins transform it: each chunk transformed and written on (to the
 * response, or a RewritingSink) with backpressure, the transforms' tail at the end. `sent` sees what
 * goes on (counted and observed); `fail` handles a transform that threw (the answer is cut short).
 */
export class TransformingSink extends Writable {
  /** A transform threw: the rest of the body is dropped. */
  private failed = false;

  constructor(
    private readonly target: Writable,
    private readonly transforms: BodyTransform[],
    private readonly sent: (chunk: Buffer) => void,
    private readonly fail: (err: unknown) => void,
  ) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.pass(() => transformChunk(chunk, this.transforms), done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.pass(() => endTransforms(this.transforms), () => {
      this.target.end();
      done();
    });
  }

  private pass(transform: () => Buffer, done: () => void): void {
    if (this.failed) return done();
    let out: Buffer;
    try {
      out = transform();
    } catch (err) {
      this.failed = true;
      this.fail(err);
      return done();
    }
    if (out.length === 0) return done();
    this.sent(out);
    if (this.target.write(out)) done();
    else this.target.once('drain', done);
  }
}
