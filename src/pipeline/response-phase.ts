/**
 * The response phase (Kong's header_filter and body_filter) over any answer of a matched request: the
 * headers plugins set during access, then each collected plugin's `response`, which may ask to rewrite
 * the body. A rewritten body is read whole first, up to REWRITABLE_BODY_LIMIT; beyond it, the body goes
 * downstream unchanged as it arrives.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import { Writable } from 'node:stream';
import type { Context } from './context.ts';
import { REWRITABLE_BODY_LIMIT, type ResponseHead, type ResponseSource } from './plugin-api.ts';

export type BodyRewrite = (body: Buffer) => Buffer;

/** Runs the response phase over an answer's head; returns the body rewrites plugins asked for, if any. */
export function runResponsePhase(ctx: Context, status: number, headers: OutgoingHttpHeaders, source: ResponseSource, rewritable: boolean): BodyRewrite[] | undefined {
  if (ctx.responseHeaders) Object.assign(headers, ctx.responseHeaders);
  if (!ctx.ran) return undefined;
  let rewrites: BodyRewrite[] | undefined;
  const head: ResponseHead = { status, headers, source };
  if (rewritable) head.rewriteBody = (rewrite) => void (rewrites ??= []).push(rewrite);
  for (const { runtime, plugin } of ctx.ran) {
    if (!runtime.response) continue;
    try {
      runtime.response(ctx, plugin.config, head);
    } catch (err) {
      // The answer is already decided; a plugin failing to decorate it must not lose it.
      ctx.log.error({ err, request_id: ctx.id, plugin: plugin.name }, 'plugin response phase failed');
    }
  }
  return rewrites;
}

/** Applies the rewrites in order; one that throws leaves the body as it was before it. */
export function rewriteAnswerBody(ctx: Context, body: Buffer, rewrites: BodyRewrite[]): Buffer {
  for (const rewrite of rewrites) {
    try {
      body = rewrite(body);
    } catch (err) {
      ctx.log.warn({ err, request_id: ctx.id }, 'response body rewrite failed; the body is sent as it was');
    }
  }
  return body;
}

/**
 * Where a proxied body goes when plugins rewrite it: collected, rewritten at its end, then sent with the
 * response head. `writeHead` sends the head (false when Node refuses it; the caller has answered then).
 */
export class RewritingSink extends Writable {
  private chunks: Buffer[] = [];
  private size = 0;
  /** The body proved larger than the limit: it goes on unchanged. */
  private passing = false;

  constructor(
    private readonly ctx: Context,
    private readonly res: ServerResponse | Http2ServerResponse,
    private readonly headers: OutgoingHttpHeaders,
    private readonly upstreamLength: OutgoingHttpHeaders[string],
    private readonly rewrites: BodyRewrite[],
    private readonly writeHead: (headers: OutgoingHttpHeaders) => boolean,
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
    const body = rewriteAnswerBody(this.ctx, Buffer.concat(this.chunks, this.size), this.rewrites);
    this.chunks = [];
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
