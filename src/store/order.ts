/**
 * Key order, the same in every adapter: UTF-8 byte order (= code point order), as LevelDB compares
 * keys and as PostgreSQL compares `text COLLATE "C"` in a UTF-8 database. JavaScript's own string
 * comparison (UTF-16 code units) differs for characters beyond U+FFFF.
 */
import type { ScanOptions } from './store.ts';

/** Sorts after every key that starts with the same prefix (U+10FFFF is the largest code point). */
const LAST_CHARACTER = '\u{10FFFF}';

/** Compares as the stores do (UTF-8 bytes), not as JavaScript does (UTF-16 code units). */
export function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** Bounds of a scan below `base` (a namespace's prefix): the prefix plus optional gte/lt within it. */
export function scanBounds(options: ScanOptions, base = ''): { gte: string; lt: string } {
  const prefix = base + (options.prefix ?? '');
  const gte = options.gte !== undefined ? base + options.gte : prefix;
  const end = prefix + LAST_CHARACTER;
  const lt = options.lt !== undefined ? base + options.lt : end;
  return { gte: byteOrder(gte, prefix) > 0 ? gte : prefix, lt: byteOrder(lt, end) < 0 ? lt : end };
}

/** The smallest key after `key` in byte order: where a forward scan resumes. */
export function successor(key: string): string {
  return key + '\u0000';
}

/** Scans start small (a limit-1 lookup reads one entry) and grow to this many entries per read. */
export const SCAN_FIRST_BATCH = 16;
export const SCAN_MAX_BATCH = 1024;

/** One page of a scan between raw bounds, at most `limit` entries, expired ones left out. */
export type PageReader = (gte: string, lt: string, reverse: boolean, limit: number) => Promise<[string, string][]>;

/**
 * A scan read page by page, each page resuming after the last key of the previous one: no cursor is
 * held between pages, so a slow consumer pins nothing in the database (at the price of seeing writes
 * made between pages, as a scan over a shared database would anyway).
 */
export async function* pagedScan(read: PageReader, options: ScanOptions, base: string): AsyncIterable<[string, string]> {
  let { gte, lt } = scanBounds(options, base);
  const reverse = options.reverse ?? false;
  let remaining = options.limit ?? Infinity;
  for (let size = SCAN_FIRST_BATCH; remaining > 0 && byteOrder(gte, lt) < 0; size = Math.min(size * 4, SCAN_MAX_BATCH)) {
    const wanted = Math.min(size, remaining);
    const page = await read(gte, lt, reverse, wanted);
    for (const [key, value] of page) yield [key.slice(base.length), value];
    remaining -= page.length;
    if (page.length < wanted) return;
    const last = page[page.length - 1][0];
    if (reverse) lt = last;
    else gte = successor(last);
  }
}
