/**
 * Kong's admin listings (kong/api/endpoints.lua, kong/db/dao/init.lua): `size` (100 when absent, else an
 * integer from 1 to 1000, or 400 invalid size), an opaque `offset` handed out by the previous page (anything
 * else is 400 invalid offset), `tags` (src/toolkit/tag-filter.ts), and the shape `{data, next, offset}`. One
 * helper for the core and the plugins, so every listing filters by tags.
 */
import type { AdminReply, AdminRequest } from '../pdk/types.ts';
import { InvalidOffsetError, InvalidSizeError } from './admin-errors.ts';
import { carriesTags, tagFilter } from './tag-filter.ts';

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

/** The `size` parameter as Kong reads it. */
export function pageSize(query: URLSearchParams): number {
  const raw = query.get('size');
  if (raw === null) return DEFAULT_PAGE_SIZE;
  const size = Number(raw);
  if (raw.trim() === '' || Number.isNaN(size)) throw new InvalidSizeError('size must be a number');
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) throw new InvalidSizeError(`size must be an integer between 1 and ${MAX_PAGE_SIZE}`);
  return size;
}

const OFFSET = /^[A-Za-z0-9_-]{1,24}$/;

/** Where a page starts: 0, or the position an earlier page's `offset` encodes. */
function pageStart(query: URLSearchParams): number {
  const offset = query.get('offset');
  if (offset === null || offset === '') return 0;
  if (!OFFSET.test(offset)) throw new InvalidOffsetError(offset, 'bad base64 encoding');
  const decoded = Buffer.from(offset, 'base64url').toString('latin1');
  if (!/^\d{1,15}$/.test(decoded)) throw new InvalidOffsetError(offset, 'bad offset string');
  return Number(decoded);
}

/** One page of the `items` that carry the request's `tags`, with Kong's `next` link to the rest (`path` is the listing's own). */
export function page<T>(items: readonly T[], req: AdminRequest, path: string): AdminReply {
  const filter = tagFilter(req.query);
  if (!filter) return pageOf(items, req, path);
  return pageOf(items.filter((item) => carriesTags(item, filter)), req, path, `&tags=${encodeURIComponent(filter.text)}`);
}

/** One page of `items` as they are (`/tags` reads `tags` itself); `linkQuery` is carried into the `next` link. */
export function pageOf<T>(items: readonly T[], req: AdminRequest, path: string, linkQuery = ''): AdminReply {
  const size = pageSize(req.query);
  const start = pageStart(req.query);
  const data = items.slice(start, start + size);
  const nextStart = start + size;
  if (nextStart >= items.length) return { status: 200, body: { data, next: null } };
  const offset = Buffer.from(String(nextStart), 'latin1').toString('base64url');
  const sizeParam = req.query.has('size') ? `&size=${size}` : '';
  return { status: 200, body: { data, next: `${path}?offset=${offset}${linkQuery}${sizeParam}`, offset } };
}
