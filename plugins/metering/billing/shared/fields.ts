/**
 * Field checks shared by every billing body (customers, features, plans, subscriptions), each pushing
 * its problem in the Konnect `invalid_parameters` shape and returning the value when usable. The same
 * checks run for API bodies and for gateway.yaml entities, so both get the same messages.
 */
import { isPlainObject } from '../../../../src/pdk/index.ts';
import type { InvalidParameter } from '../../shared/errors.ts';
import { KEY_PATTERN } from '../../shared/limits.ts';
import { invalid } from './errors.ts';
import { numberText } from './exact-json.ts';
import { EXACT_NUMBER_DIGITS, MAX_DECIMAL_LENGTH, parseDecimal, parseNumber, parseNumberText, type Decimal } from './money.ts';

export type Problems = InvalidParameter[];
export type Body = Record<string, unknown>;

export function isObject(v: unknown): v is Body {
  return isPlainObject(v);
}

const present = (v: unknown) => v !== undefined && v !== null;

/** Refuses properties other than `allowed` (bodies are sealed, as OpenMeter's). */
export function sealed(body: Body, allowed: readonly string[], at: string, out: Problems): void {
  for (const k of Object.keys(body)) if (!allowed.includes(k)) out.push(invalid(join(at, k), 'unknown property', 'unknown_property'));
}

export function join(at: string, field: string | number): string {
  if (typeof field === 'number') return `${at}[${field}]`;
  return at ? `${at}.${field}` : field;
}

interface TextRule {
  required?: boolean;
  min?: number;
  max: number;
  pattern?: RegExp;
}

/** A string field: undefined when absent (or null), and when invalid (the problem is recorded). */
export function text(body: Body, field: string, at: string, rule: TextRule, out: Problems): string | undefined {
  const v = body[field];
  const path = join(at, field);
  if (!present(v) || v === '') {
    if (rule.required) out.push(invalid(path, `${field} is required`, 'required'));
    else if (v === '' && (rule.min ?? 0) > 0) out.push(invalid(path, `length must be at least ${rule.min}`, 'min_length', { minimum: rule.min }));
    return undefined;
  }
  if (typeof v !== 'string') return void out.push(invalid(path, 'must be a string', 'is_string'));
  if (v.length > rule.max) return void out.push(invalid(path, `length must be at most ${rule.max}`, 'max_length', { maximum: rule.max }));
  if (rule.pattern && !rule.pattern.test(v)) return void out.push(invalid(path, `must match pattern ${rule.pattern.source}`, 'matches_regex'));
  return v;
}

/** Feature, plan, phase and rate card keys (OpenMeter's ResourceKey): `^[a-z0-9]+(?:_[a-z0-9]+)*$`, 1–64 characters. */
export function resourceKey(body: Body, field: string, at: string, out: Problems, required = true): string | undefined {
  return text(body, field, at, { required, min: 1, max: 64, pattern: KEY_PATTERN }, out);
}

export function name(body: Body, at: string, out: Problems, required = true): string | undefined {
  return text(body, 'name', at, { required, min: 1, max: 256 }, out);
}

export function description(body: Body, at: string, out: Problems): string | null {
  return text(body, 'description', at, { max: 1024 }, out) ?? null;
}

const RESERVED_LABEL_PREFIXES = ['kong', 'konnect', 'mesh', 'kic', '_'];
const MAX_LABELS = 50;

/** Labels: a string map; keys 1–63 characters not starting with a reserved prefix (Konnect's rule). */
export function labels(body: Body, at: string, out: Problems): Record<string, string> {
  const v = body.labels;
  const path = join(at, 'labels');
  if (!present(v)) return {};
  if (!isObject(v)) return out.push(invalid(path, 'must be an object of strings', 'type')), {};
  const entries = Object.entries(v);
  if (entries.length > MAX_LABELS) return out.push(invalid(path, `at most ${MAX_LABELS} labels are allowed`, 'max_items', { maximum: MAX_LABELS })), {};
  const result: Record<string, string> = {};
  for (const [k, value] of entries) {
    const field = join(path, k);
    if (k.length < 1 || k.length > 63) out.push(invalid(field, 'label keys must be 1 to 63 characters long', 'invalid'));
    else if (RESERVED_LABEL_PREFIXES.some((p) => k.toLowerCase().startsWith(p))) out.push(invalid(field, `label keys must not start with ${RESERVED_LABEL_PREFIXES.join(', ')}`, 'invalid'));
    else if (typeof value !== 'string' || value.length > 256) out.push(invalid(field, 'must be a string of at most 256 characters', 'is_string'));
    else result[k] = value;
  }
  return result;
}

/** A non-negative decimal string (amounts, tier bounds). */
export function amount(body: Body, field: string, at: string, out: Problems, required = true): Decimal | undefined {
  const v = body[field];
  const path = join(at, field);
  if (!present(v)) {
    if (required) out.push(invalid(path, `${field} is required`, 'required'));
    return undefined;
  }
  const d = parseDecimal(v);
  if (!d) return void out.push(invalid(path, `must be a decimal string (e.g. "12.5") of at most ${MAX_DECIMAL_LENGTH} characters`, 'decimal'));
  return nonNegative(d, path, out);
}

/**
 * A non-negative decimal given as a decimal string or as a number, where OpenMeter's v3 API types the
 * field as a number (an entitlement's limit). A number is read from its JSON text (exact-json.ts), every
 * digit kept; from gateway.yaml, whose loader keeps no text, only a number a double holds as written.
 */
export function decimalOrNumber(body: Body, field: string, at: string, out: Problems, required = true): Decimal | undefined {
  const v = body[field];
  if (typeof v !== 'number') return amount(body, field, at, out, required);
  const path = join(at, field);
  const text = numberText(body, field);
  const d = text === undefined ? parseNumber(v) : parseNumberText(text);
  if (d) return nonNegative(d, path, out);
  const reason = text === undefined
    ? `a number of more than ${EXACT_NUMBER_DIGITS} significant digits may have lost some: write it as a decimal string (e.g. "12.5")`
    : `must be a number of at most ${MAX_DECIMAL_LENGTH} digits`;
  out.push(invalid(path, reason, 'decimal'));
}

function nonNegative(d: Decimal, path: string, out: Problems): Decimal | undefined {
  if (d.isNegative()) return void out.push(invalid(path, 'must not be negative', 'minimum', { minimum: 0 }));
  return d;
}

export function boolean(body: Body, field: string, at: string, fallback: boolean, out: Problems): boolean {
  const v = body[field];
  if (!present(v)) return fallback;
  if (typeof v !== 'boolean') return out.push(invalid(join(at, field), 'must be a boolean', 'type')), fallback;
  return v;
}

/** An object field (absent: undefined, without a problem unless required). */
export function object(body: Body, field: string, at: string, out: Problems, required = false): Body | undefined {
  const v = body[field];
  const path = join(at, field);
  if (!present(v)) {
    if (required) out.push(invalid(path, `${field} is required`, 'required'));
    return undefined;
  }
  if (!isObject(v)) return void out.push(invalid(path, 'must be an object', 'type'));
  return v;
}

/** An array field of at most `max` items. */
export function array(body: Body, field: string, at: string, out: Problems, rule: { required?: boolean; min?: number; max: number }): unknown[] | undefined {
  const v = body[field];
  const path = join(at, field);
  if (!present(v)) {
    if (rule.required) out.push(invalid(path, `${field} is required`, 'required'));
    return undefined;
  }
  if (!Array.isArray(v)) return void out.push(invalid(path, 'must be an array', 'type'));
  if (rule.min !== undefined && v.length < rule.min) return void out.push(invalid(path, `must have at least ${rule.min} item${rule.min === 1 ? '' : 's'}`, 'min_items', { minimum: rule.min }));
  if (v.length > rule.max) return void out.push(invalid(path, `must have at most ${rule.max} items`, 'max_items', { maximum: rule.max }));
  return v;
}

/** A reference `{id}` or `{key}` (the id wins when both are given, as OpenMeter). */
export function reference(
  body: Body,
  field: string,
  at: string,
  out: Problems,
  extra: readonly string[] = [],
): { id?: string; key?: string; rest: Body } | undefined {
  const ref = object(body, field, at, out, true);
  if (!ref) return undefined;
  const path = join(at, field);
  sealed(ref, ['id', 'key', ...extra], path, out);
  const id = text(ref, 'id', path, { max: 64 }, out);
  const key = text(ref, 'key', path, { max: 256 }, out);
  if (id === undefined && key === undefined && ref.id === undefined && ref.key === undefined) {
    out.push(
      invalid(join(path, 'id'), 'id or key is required', 'required'),
      invalid(join(path, 'key'), 'id or key is required', 'required'),
    );
    return undefined;
  }
  return { id, key: id === undefined ? key : undefined, rest: ref };
}
