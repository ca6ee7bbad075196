/**
 * What every v1 area shares: v3's snake_case bodies as v1's camelCase and back (`labels` is v1's
 * `metadata`), user maps left as they are, and v1's page-number pagination.
 */
import type { InvalidParameter } from '../../shared/errors.ts';
import { validationProblem, type MeteringRequest } from '../http.ts';

export const camelName = (name: string) => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
export const snakeName = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Maps whose keys are the user's (label names, dimensions), never renamed. */
const USER_MAPS = new Set(['labels', 'metadata', 'filters', 'dimensions', 'config']);

function renameDeep(value: unknown, rename: (name: string) => string, v1: boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => renameDeep(v, rename, v1));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const name = key === (v1 ? 'labels' : 'metadata') ? (v1 ? 'metadata' : 'labels') : rename(key);
    out[name] = USER_MAPS.has(key) ? v : renameDeep(v, rename, v1);
  }
  return out;
}

/** A v3 answer as v1 shows it. */
export const toV1 = <T = Record<string, unknown>>(value: unknown) => renameDeep(value, camelName, true) as T;
/** A v1 body as the v3 domain reads it (anything but an object is left for the domain to refuse). */
export const fromV1 = <T = Record<string, unknown>>(value: unknown) => renameDeep(value, snakeName, false) as T;

export interface Page {
  page: number;
  pageSize: number;
}

const MAX_PAGE_SIZE = 1000;

/** `page` (from 1) and `pageSize` (1–1000, default 100), or undefined when neither is given (lists that answer arrays then). */
export function pageOf(ctx: MeteringRequest, always = true): Page | undefined {
  const q = ctx.query;
  if (!always && q.get('page') === null && q.get('pageSize') === null) return undefined;
  const problems: InvalidParameter[] = [];
  const read = (name: string, fallback: number, max: number) => {
    const raw = q.get(name);
    const n = raw === null ? fallback : Number(raw);
    if (!Number.isInteger(n) || n < 1 || n > max) problems.push({ field: name, reason: `must be an integer between 1 and ${max}`, rule: 'range', source: 'query', minimum: 1, maximum: max });
    return n;
  };
  const page = { page: read('page', 1, Number.MAX_SAFE_INTEGER), pageSize: read('pageSize', 100, MAX_PAGE_SIZE) };
  if (problems.length) throw validationProblem(problems);
  return page;
}

/** v1's `{totalCount, page, pageSize, items}`. */
export function paginated<T, U>(items: T[], page: Page, map: (item: T) => U): { totalCount: number; page: number; pageSize: number; items: U[] } {
  const start = (page.page - 1) * page.pageSize;
  return { totalCount: items.length, page: page.page, pageSize: page.pageSize, items: items.slice(start, start + page.pageSize).map(map) };
}

/** A page when the client asked for one, else the whole list as an array (v1's `List…Result` unions). */
export function listOrPage<T>(ctx: MeteringRequest, items: T[], map: (item: T) => unknown): object {
  const page = pageOf(ctx, false);
  return page ? paginated(items, page, map) : items.map(map);
}

/** Repeated (`a=1&a=2`) or comma-separated values of a query parameter. */
export function queryList(ctx: MeteringRequest, name: string): string[] {
  return ctx.query.getAll(name).flatMap((v) => v.split(',')).filter((v) => v !== '');
}

export const byText = <T>(of: (item: T) => string) => (a: T, b: T) => (of(a) < of(b) ? -1 : of(a) > of(b) ? 1 : 0);
