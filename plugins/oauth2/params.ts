/**
 * Kong's `retrieve_parameters`: query arguments merged with the parsed body of POST/PUT/PATCH requests
 * (form, JSON or multipart; the body wins). Values keep their JSON types, repeated keys become arrays,
 * a bare `?flag` is `true`. Malformed bodies read as no parameters (the endpoint then answers 4xx).
 * Parameters are read before anyone is authenticated, so a body is read only up to MAX_PARAMETER_BODY
 * and at most MAX_PARAMETERS of each part are accepted: LimitError beyond either.
 */
import type { RequestContext } from '../../src/pipeline/plugin-api.ts';
import { LimitError, MAX_PARAMETER_BODY, MAX_PARAMETERS } from './errors.ts';

export type Params = Record<string, unknown>;

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);
/** The bodies Kong reads parameters from. */
const BODY_PARAM_TYPES = new Set(['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data']);

/** `a=1&a=2&flag` → `{a: ['1','2'], flag: true}` (`+` is a space, as in forms); more than `limit` throws. */
export function parseArgs(raw: string, limit = Infinity): Params {
  const out: Params = {};
  if (!raw) return out;
  let count = 0;
  for (const part of raw.split('&')) {
    if (!part) continue;
    if (++count > limit) throw LimitError.tooManyParameters();
    const eq = part.indexOf('=');
    const key = decodeArg(eq < 0 ? part : part.slice(0, eq));
    const value: unknown = eq < 0 ? true : decodeArg(part.slice(eq + 1));
    addValue(out, key, value);
  }
  return out;
}

/** One form-encoded key or value (`+` is a space); malformed escapes are kept as sent. */
export function decodeArg(s: string): string {
  const spaced = s.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

function addValue(out: Params, key: string, value: unknown): void {
  const existing = out[key];
  if (existing === undefined) out[key] = value;
  else if (Array.isArray(existing)) existing.push(value);
  else out[key] = [existing, value];
}

export function mediaType(ctx: RequestContext): string {
  const header = ctx.headers['content-type'];
  return typeof header === 'string' ? header.split(';')[0].trim().toLowerCase() : '';
}

/** The body's parameters, for the content types Kong parses; `{}` otherwise. */
export async function readBodyParams(ctx: RequestContext): Promise<Params> {
  const type = paramBodyType(ctx);
  if (type === undefined) return {};
  const body = await ctx.readBodyWithin(MAX_PARAMETER_BODY);
  if (body === undefined) throw LimitError.bodyTooLarge();
  if (body.length === 0) return {};
  if (type === 'application/x-www-form-urlencoded') return parseArgs(body.toString('utf8'), MAX_PARAMETERS);
  if (type === 'multipart/form-data') return parseMultipart(body, String(ctx.headers['content-type']));
  const params = parseJsonObject(body);
  if (Object.keys(params).length > MAX_PARAMETERS) throw LimitError.tooManyParameters();
  return params;
}

/** The media type of a body Kong reads parameters from, or undefined. */
function paramBodyType(ctx: RequestContext): string | undefined {
  const type = mediaType(ctx);
  return METHODS_WITH_BODY.has(ctx.method) && BODY_PARAM_TYPES.has(type) ? type : undefined;
}

function parseJsonObject(body: Buffer): Params {
  try {
    const parsed = JSON.parse(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** A multipart body's fields (the platform's parser); undefined when it does not parse. */
function readFormData(body: Buffer, contentType: string): Promise<FormData | undefined> {
  return new Response(new Uint8Array(body), { headers: { 'content-type': contentType } }).formData().catch(() => undefined);
}

async function parseMultipart(body: Buffer, contentType: string): Promise<Params> {
  const out: Params = {};
  let count = 0;
  for (const [key, value] of (await readFormData(body, contentType)) ?? []) {
    if (++count > MAX_PARAMETERS) throw LimitError.tooManyParameters();
    if (typeof value === 'string') addValue(out, key, value);
  }
  return out;
}

/** Form-encoded arguments without any `name` parameter. */
export function argsWithout(raw: string, name: string): string {
  return raw
    .split('&')
    .filter((part) => decodeArg(part.split('=')[0]) !== name)
    .join('&');
}

/**
 * The request body without the parameter `name` (form, JSON object or multipart), and its new content
 * type; undefined when the body holds no such parameter, is of another type, or is too large to hold
 * parameters (it was never read for them, and goes upstream untouched).
 */
export async function bodyWithout(ctx: RequestContext, name: string): Promise<{ body: Buffer; contentType: string } | undefined> {
  const type = paramBodyType(ctx);
  if (type === undefined) return undefined;
  const contentType = String(ctx.headers['content-type']);
  const body = await ctx.readBodyWithin(MAX_PARAMETER_BODY);
  if (body === undefined) return undefined;
  if (type === 'application/x-www-form-urlencoded') {
    const raw = body.toString('utf8');
    const cleaned = argsWithout(raw, name);
    return cleaned === raw ? undefined : { body: Buffer.from(cleaned), contentType };
  }
  if (type === 'application/json') {
    const parsed = parseJsonObject(body);
    if (!(name in parsed)) return undefined;
    delete parsed[name];
    return { body: Buffer.from(JSON.stringify(parsed)), contentType };
  }
  const form = await readFormData(body, contentType);
  if (!form?.has(name)) return undefined;
  form.delete(name);
  // Serialized again with a boundary of its own, which the new content type names.
  const rebuilt = new Response(form);
  return { body: Buffer.from(await rebuilt.arrayBuffer()), contentType: rebuilt.headers.get('content-type')! };
}

export interface RequestParams {
  params: Params;
  /** A query, form or multipart parameter sent more than once (RFC 6749 §3.1, §3.2 forbid it), if any. */
  repeated: string | undefined;
}

/** Query and body parameters together, the body winning; LimitError beyond the limits. */
export async function readParams(ctx: RequestContext): Promise<RequestParams> {
  const query = parseArgs(ctx.rawQuery, MAX_PARAMETERS);
  const body = await readBodyParams(ctx);
  // Only JSON values can be arrays by themselves; elsewhere an array is a repeated key.
  const repeated = firstArrayKey(query) ?? (mediaType(ctx) === 'application/json' ? undefined : firstArrayKey(body));
  return { params: { ...query, ...body }, repeated };
}

function firstArrayKey(params: Params): string | undefined {
  return Object.keys(params).find((key) => Array.isArray(params[key]));
}

/** A parameter as a non-empty string, or undefined. */
export function stringParam(params: Params, name: string): string | undefined {
  const v = params[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** `authenticated_userid` as a non-blank string (numbers as their text), or undefined. */
export function userIdParam(params: Params): string | undefined {
  const value = params.authenticated_userid;
  const text = typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
  return text !== undefined && text.trim() !== '' ? text : undefined;
}
