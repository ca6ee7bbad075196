/**
 * Kong's `?tags=` on entity listings (kong/api/endpoints.lua `extract_options`, kong/db/dao/init.lua
 * `validate_options_value`, kong/db/strategies/off `filter_tag_items`): `a,b` keeps the entities that carry
 * all of the tags, `a/b` those that carry any of them; at most 5 tags. A filter mixing `,` and `/`, with an
 * empty tag or a control character is refused with Kong's messages, never read as some other filter.
 */
import { InvalidOptionsError } from './admin-errors.ts';

export interface TagFilter {
  tags: string[];
  /** `a,b`: every tag; `a/b`: any of them. */
  every: boolean;
  /** As the client wrote it, for the next page's link. */
  text: string;
}

const MAX_TAGS = 5;
/** Kong's tag bytes: printable ASCII and UTF-8; `,` and `/` only as separators. */
const TAG = /^[\x20-\x2B\x2D\x2E\x30-\x7E\u{80}-\u{10FFFF}]+$/u;

function invalid(reason: string): InvalidOptionsError {
  return new InvalidOptionsError({ tags: reason });
}

/** The listing's tag filter, or undefined when `tags` is absent. */
export function tagFilter(query: URLSearchParams): TagFilter | undefined {
  const text = query.get('tags');
  if (text === null) return undefined;
  if (text === '') throw invalid('cannot be null');
  const every = !text.includes('/');
  const tags = text.split(every ? ',' : '/');
  if (!tags.every((tag) => TAG.test(tag))) throw invalid('invalid filter syntax');
  if (tags.length > MAX_TAGS) throw invalid(`cannot query more than ${MAX_TAGS} tags`);
  return { tags, every, text };
}

/** Whether an entity's `tags` satisfy the filter; an entity without tags satisfies none. */
export function carriesTags(entity: unknown, filter: TagFilter): boolean {
  const carried = (entity as { tags?: unknown }).tags;
  if (!Array.isArray(carried)) return false;
  const has = (tag: string) => carried.includes(tag);
  return filter.every ? filter.tags.every(has) : filter.tags.some(has);
}
