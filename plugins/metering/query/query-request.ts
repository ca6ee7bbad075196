/**
 * A usage query as the client asks it (`POST /meters/{id}/query`): the body validated with OpenMeter's
 * codes into a MeterQuery, and what its dimension filters mean. The engine that answers it is query.ts.
 */
import type { InvalidParameter } from '../shared/errors.ts';
import { formatUtc, isPrintable, isValidTimeZone, parseRfc3339, PRINTABLE_FROM, PRINTABLE_TO } from '../shared/time.ts';
import type { CompiledMeter } from '../meter/port.ts';
import { GRANULARITIES, type Granularity } from '../aggregation/port.ts';

const FILTER_OPERATORS = ['exists', 'eq', 'neq', 'in', 'nin', 'contains', 'ncontains', 'and', 'or'];
/** Levels of `and`/`or` a filter may hold (OpenMeter's maxGroupByFilterComplexityDepth). */
const MAX_FILTER_DEPTH = 2;
/** Values of one `in`/`nin` (OpenMeter's `@maxItems(100)`, api/spec/packages/aip/src/shared/filters.tsp). */
const MAX_FILTER_VALUES = 100;
/**
 * The pseudo-dimension of the customer a subject's usage belongs to (billing's usage attribution): its
 * value is the customer's id, filled in from `MeterQuery.customerOf` (customer-query.ts resolves it).
 */
export const CUSTOMER_DIMENSION = 'customer_id';
/** Dimensions every meter has beside its own, filtered only by `eq`/`in` (OpenMeter v3). */
const IDENTITY_DIMENSIONS = ['subject', CUSTOMER_DIMENSION];

export interface Filter {
  exists?: boolean;
  eq?: string;
  neq?: string;
  in?: string[];
  nin?: string[];
  contains?: string;
  ncontains?: string;
  and?: Filter[];
  or?: Filter[];
}

export interface MeterQuery {
  from?: number;
  to?: number;
  granularity?: Granularity;
  timeZone: string;
  /** Requested groupings, `subject`, `customer_id` and/or dimension names, in request order. */
  groupBy: string[];
  filters: Record<string, Filter>;
  /**
   * Subject -> id of the customer its usage belongs to, when the query filters or groups by
   * `customer_id`: set where the customers are read (customer-query.ts), before the query runs near
   * the data. A subject missing here belongs to no customer.
   */
  customerOf?: Record<string, string>;
}

function bad(field: string, reason: string, rule: string): InvalidParameter {
  return { field, reason, rule, source: 'body' };
}

/** `depth`: how many `and`/`or` levels hold this filter, plus one. */
function checkFilter(value: unknown, field: string, depth: number, onlyEqIn: boolean, out: InvalidParameter[]): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return void out.push(bad(field, 'must be an object', 'type'));
  for (const [op, operand] of Object.entries(value)) {
    const f = `${field}.${op}`;
    if (!FILTER_OPERATORS.includes(op)) out.push(bad(f, `unknown filter operator: ${op}`, 'unsupported_filter_operator'));
    else if (onlyEqIn && op !== 'eq' && op !== 'in') out.push(bad(f, `unsupported filter operator for this dimension: ${op} (only eq and in)`, 'unsupported_filter_operator'));
    else if (op === 'exists') {
      if (typeof operand !== 'boolean') out.push(bad(f, 'must be a boolean', 'type'));
    } else if (op === 'in' || op === 'nin') {
      if (!Array.isArray(operand) || operand.some((x) => typeof x !== 'string')) out.push(bad(f, 'must be an array of strings', 'type'));
      else if (operand.length > MAX_FILTER_VALUES) out.push({ ...bad(f, `at most ${MAX_FILTER_VALUES} values`, 'max_items'), maximum: MAX_FILTER_VALUES });
    } else if (op === 'and' || op === 'or') {
      if (depth > MAX_FILTER_DEPTH) out.push(bad(f, `filter complexity exceeds maximum allowed depth (${MAX_FILTER_DEPTH} levels of and/or)`, 'max_depth'));
      else if (!Array.isArray(operand)) out.push(bad(f, 'must be an array of filters', 'type'));
      else operand.forEach((item, i) => checkFilter(item, `${f}[${i}]`, depth + 1, false, out));
    } else if (typeof operand !== 'string') out.push(bad(f, 'must be a string', 'is_string'));
  }
}

/** Validates a query body against a meter; returns the query or every problem. */
export function parseQuery(body: unknown, meter: CompiledMeter): { query?: MeterQuery; problems: InvalidParameter[] } {
  const problems: InvalidParameter[] = [];
  if (body === undefined || body === null) body = {};
  if (typeof body !== 'object' || Array.isArray(body)) return { problems: [bad('body', 'must be a JSON object', 'type')] };
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) {
    if (!['from', 'to', 'granularity', 'time_zone', 'group_by_dimensions', 'filters'].includes(k)) problems.push(bad(k, 'unknown property', 'unknown_property'));
  }
  const instant = (name: 'from' | 'to'): number | undefined => {
    const v = b[name];
    if (v === undefined || v === null) return undefined;
    const t = typeof v === 'string' ? parseRfc3339(v) : undefined;
    if (t === undefined) problems.push(bad(name, 'must be an RFC 3339 date-time', 'is_date_time'));
    else if (!isPrintable(t)) problems.push(bad(name, `must be between ${formatUtc(PRINTABLE_FROM)} and ${formatUtc(PRINTABLE_TO)}`, 'range'));
    else return t;
    return undefined;
  };
  const from = instant('from');
  const to = instant('to');
  if (from !== undefined && to !== undefined) {
    if (from === to) problems.push(bad('to', 'from and to cannot be equal', 'invalid'));
    else if (from > to) problems.push(bad('from', 'from must be before to', 'invalid'));
  }
  let granularity: Granularity | undefined;
  if (b.granularity !== undefined && b.granularity !== null) {
    if ((GRANULARITIES as readonly unknown[]).includes(b.granularity)) granularity = b.granularity as Granularity;
    else problems.push({ ...bad('granularity', `invalid window size: ${String(b.granularity)}`, 'invalid_window_size'), choices: GRANULARITIES });
  }
  let timeZone = 'UTC';
  if (b.time_zone !== undefined && b.time_zone !== null) {
    if (typeof b.time_zone === 'string' && isValidTimeZone(b.time_zone)) timeZone = b.time_zone;
    else problems.push(bad('time_zone', `invalid time zone: ${String(b.time_zone)}`, 'invalid_time_zone'));
  }
  const groupBy: string[] = [];
  const known = (name: string) => IDENTITY_DIMENSIONS.includes(name) || meter.dimensionNames.includes(name);
  if (b.group_by_dimensions !== undefined && b.group_by_dimensions !== null) {
    if (!Array.isArray(b.group_by_dimensions)) problems.push(bad('group_by_dimensions', 'must be an array of strings', 'type'));
    else if (b.group_by_dimensions.length > 100) problems.push(bad('group_by_dimensions', 'at most 100 items', 'max_items'));
    else {
      b.group_by_dimensions.forEach((name, i) => {
        if (typeof name !== 'string' || !known(name)) problems.push(bad(`group_by_dimensions[${i}]`, `invalid group by: ${String(name)}`, 'invalid_group_by'));
        else if (!groupBy.includes(name)) groupBy.push(name);
      });
    }
  }
  const filters: Record<string, Filter> = {};
  if (b.filters !== undefined && b.filters !== null) {
    const f = b.filters as Record<string, unknown>;
    if (typeof f !== 'object' || Array.isArray(f)) problems.push(bad('filters', 'must be an object', 'type'));
    else {
      for (const k of Object.keys(f)) if (k !== 'dimensions') problems.push(bad(`filters.${k}`, 'unknown property', 'unknown_property'));
      const dims = f.dimensions as Record<string, unknown> | undefined | null;
      if (dims !== undefined && dims !== null) {
        if (typeof dims !== 'object' || Array.isArray(dims)) problems.push(bad('filters.dimensions', 'must be an object', 'type'));
        else if (Object.keys(dims).length > 10) problems.push(bad('filters.dimensions', 'at most 10 dimensions', 'max_items'));
        else {
          for (const [name, filter] of Object.entries(dims)) {
            const field = `filters.dimensions.${name}`;
            if (!known(name)) problems.push(bad(field, `invalid dimension filter: ${name}`, 'invalid_dimension_filter'));
            else {
              const before = problems.length;
              const identity = IDENTITY_DIMENSIONS.includes(name);
              checkFilter(filter, field, 1, identity, problems);
              if (problems.length === before && (!identity || namesValues(filter as Filter))) filters[name] = filter as Filter;
            }
          }
        }
      }
    }
  }
  // Filtering by subject or customer also groups by it (OpenMeter v3).
  for (const name of [...IDENTITY_DIMENSIONS].reverse()) if (filters[name] && !groupBy.includes(name)) groupBy.unshift(name);
  if (problems.length > 0) return { problems };
  return { query: { from, to, granularity, timeZone, groupBy, filters }, problems };
}

/** A subject or customer filter applies (and groups by it) only when it names one, as OpenMeter's. */
export function namesValues(f: Filter): boolean {
  return f.eq !== undefined || (f.in !== undefined && f.in.length > 0);
}

/** contains/ncontains ignore case: OpenMeter compares LOWER(value) LIKE LOWER('%text%'). */
const containsFolded = (value: string, text: string) => value.toLowerCase().includes(text.toLowerCase());

export function matches(value: string, f: Filter): boolean {
  if (f.exists !== undefined && (value !== '') !== f.exists) return false;
  if (f.eq !== undefined && value !== f.eq) return false;
  if (f.neq !== undefined && value === f.neq) return false;
  if (f.in && !f.in.includes(value)) return false;
  if (f.nin && f.nin.includes(value)) return false;
  if (f.contains !== undefined && !containsFolded(value, f.contains)) return false;
  if (f.ncontains !== undefined && containsFolded(value, f.ncontains)) return false;
  if (f.and && !f.and.every((g) => matches(value, g))) return false;
  if (f.or && !f.or.some((g) => matches(value, g))) return false;
  return true;
}
