/**
 * Reading a downstream request body: whole and bounded (plugins, the admin API), or its head only,
 * with the rest left unread to be streamed on after it (the proxy); and telling whether one follows.
 */
import type { IncomingMessage } from 'node:http';
import { Http2ServerRequest } from 'node:http2';
import { Readable } from 'node:stream';
import { MESSAGES } from '../proxy/respond.ts';
import type { DownstreamRequest } from './core-context.ts';
import { HttpError } from './http-error.ts';

/** The most bytes a request body may have (Infinity: no limit), and the status a larger one is refused with. */
export interface BodyLimit {
  bytes: number;
  status: number;
}

/** A limit of `bytes` refused with 413; 0 is nginx's "no limit" (client_max_body_size). */
export function bodyLimitOf(bytes: number): BodyLimit {
  return { bytes: bytes > 0 ? bytes : Infinity, status: 413 };
}

/** Reads a request body into memory, refusing more than `limit` allows. */
export async function readWhole(req: DownstreamRequest, limit: BodyLimit, head?: BodyHead): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (declared > limit.bytes) throw new HttpError(limit.status, MESSAGES.bodyTooLarge);
  const read = await collect(req, limit.bytes, head);
  if (!read.ended) {
    // Drained without being kept, so that the connection can carry the refusal.
    req.resume();
    throw new HttpError(limit.status, MESSAGES.bodyTooLarge);
  }
  return read.chunks.length === 1 ? read.chunks[0] : Buffer.concat(read.chunks, read.size);
}

/** What was read of a body: all of it (`ended`), or its first chunks when it proved larger than wanted. */
export interface BodyHead {
  chunks: Buffer[];
  size: number;
  ended: boolean;
}

/**
 * Reads until the body ends or holds more than `limit` bytes; in the second case the stream is left
 * paused with the rest unread, and what was read is returned to be sent on ahead of it.
 */
export function collect(req: DownstreamRequest, limit: number, head: BodyHead = { chunks: [], size: 0, ended: false }): Promise<BodyHead> {
  return new Promise((resolve, reject) => {
    const chunks = [...head.chunks];
    let size = head.size;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      chunks.push(chunk);
      if (size <= limit) return;
      cleanup();
      req.pause();
      resolve({ chunks, size, ended: false });
    };
    const onEnd = () => {
      cleanup();
      resolve({ chunks, size, ended: true });
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
    // A body left paused by an earlier collect does not flow again by itself.
    req.resume();
  });
}

/** The chunks already read, then the rest of the stream, as one stream (destroying it destroys `rest`). */
export function prepend(head: Buffer[], rest: DownstreamRequest): Readable {
  return Readable.from(
    (async function* () {
      yield* head;
      yield* rest;
    })(),
    { objectMode: false },
  );
}

/** Whether a body follows the request's head (declared, chunked, or an HTTP/2 stream left open). */
export function hasBody(req: DownstreamRequest): boolean {
  if (req instanceof Http2ServerRequest) return !req.stream.endAfterHeaders;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}
