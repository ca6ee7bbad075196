/**
 * Request parameters as Kong's plugins read them (`kong.request.get_query`, `get_body`): query arguments and
 * the parsed body of POST/PUT/PATCH requests (form, JSON or multipart). Values keep their JSON types,
 * repeated keys become arrays, a bare `?flag` is `true`. A malformed body reads as no parameters.
 * Parameters are read before anyone is authenticated, so a body is read only up to MAX_PARAMETER_BODY and
 * at most MAX_PARAMETERS of each part are accepted: RequestLimitError beyond either.
 */
import { STATUS_CODES } from 'node:http';
import type { AccessContext, RequestView, ResponseHead } from '../pdk/types.ts';
import { downstreamRequestOf, type CoreContext } from '../pipeline/core-context.ts';
import { parseUntrustedJson } from './json.ts';
import { MAX_PARAMETER_BODY, MAX_PARAMETERS, RequestLimitError } from './limits.ts';

export type Params = Record<string, unknown>;

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);
/** The bodies Kong reads parameters from. */
const BODY_PARAM_TYPES = new Set(['application/x-www-form-urlencoded', 'application/json', 'multipart/form-data']);

/** `a=1&a=2&flag` → `{a: ['1','2'], flag: true}` (`+` is a space, as in forms); more than `limit` throws. */
export function parseArgs(raw: string, limit = Infinity): Params {
  // No prototype: a `__proto__` argument is an argument like any other.
  const out: Params = Object.create(null);
  if (!raw) return out;
  let count = 0;
  for (const part of raw.split('&')) {
    if (!part) continue;
    if (++count > limit) throw RequestLimitError.tooManyParameters();
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

/** A Content-Type's media type without parameters, lower case ('' when absent). */
export function mediaType(header: string | string[] | undefined): string {
  return typeof header === 'string' ? header.split(';')[0].trim().toLowerCase() : '';
}

/** Which requests' bodies hold parameters. */
export interface BodyScope {
  /**
   * Any method's body, as `kong.request.get_body` reads it; by default only POST, PUT and PATCH ones
   * (RFC 6750 §2.2: a bearer token is never read from a GET's body).
   */
  anyMethod?: boolean;
}

/** The body's parameters, for the content types Kong parses; `{}` otherwise. */
export async function readBodyParams(ctx: AccessContext, scope: BodyScope = {}): Promise<Params> {
  const type = paramBodyType(ctx, scope);
  if (type === undefined) return {};
  const body = await ctx.readBodyWithin(MAX_PARAMETER_BODY);
  if (body === undefined) throw RequestLimitError.bodyTooLarge();
  if (body.length === 0) return {};
  if (type === 'application/x-www-form-urlencoded') return parseArgs(body.toString('utf8'), MAX_PARAMETERS);
  if (type === 'multipart/form-data') return parseMultipart(body, String(ctx.headers['content-type']));
  const params = parseJsonObject(body);
  if (Object.keys(params).length > MAX_PARAMETERS) throw RequestLimitError.tooManyParameters();
  return params;
}

/**
 * The body's parameters where a credential may be sent: a body too large or with too many parameters
 * holds none, as in Kong, which cannot read a body nginx spilled to disk. It is not read into memory, and
 * goes upstream untouched if the caller authenticates otherwise.
 */
export async function credentialBodyParams(ctx: AccessContext, scope: BodyScope = {}): Promise<Params> {
  try {
    return await readBodyParams(ctx, scope);
  } catch (err) {
    if (err instanceof RequestLimitError) return {};
    throw err;
  }
}

/** The media type of a body Kong reads parameters from, or undefined. */
function paramBodyType(ctx: RequestView, scope: BodyScope): string | undefined {
  const type = mediaType(ctx.headers['content-type']);
  return (scope.anyMethod || METHODS_WITH_BODY.has(ctx.method)) && BODY_PARAM_TYPES.has(type) ? type : undefined;
}

function parseJsonObject(body: Buffer): Params {
  try {
    const parsed = parseUntrustedJson(body.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Params) : {};
  } catch {
    return {};
  }
}

/** A multipart body's fields (the platform's parser); undefined when it does not parse. */
function readFormData(body: Buffer, contentType: string): Promise<FormData | undefined> {
  return new Response(new Uint8Array(body), { headers: { 'content-type': contentType } }).formData().catch(() => undefined);
}

async function parseMultipart(body: Buffer, contentType: string): Promise<Params> {
  const out: Params = Object.create(null);
  let count = 0;
  for (const [key, value] of (await readFormData(body, contentType)) ?? []) {
    if (++count > MAX_PARAMETERS) throw RequestLimitError.tooManyParameters();
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

/** Removes the query argument `name` from what goes upstream (Kong's `clear_query_arg`). */
export function clearQueryArg(ctx: AccessContext, name: string): void {
  if (ctx.rawQuery === '') return;
  const cleaned = argsWithout(ctx.rawQuery, name);
  if (cleaned !== ctx.rawQuery) ctx.setUpstreamQuery(cleaned);
}

/**
 * The request body without the parameter `name` (form, JSON object or multipart), and its new content
 * type; undefined when the body holds no such parameter, is of another type, or is too large to hold
 * parameters (it was never read for them, and goes upstream untouched).
 */
export async function bodyWithout(ctx: AccessContext, name: string, scope: BodyScope = {}): Promise<{ body: Buffer; contentType: string } | undefined> {
  const type = paramBodyType(ctx, scope);
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

/** Removes the body parameter `name` from what goes upstream, when the body has one. */
export async function clearBodyParam(ctx: AccessContext, name: string, scope: BodyScope = {}): Promise<void> {
  const cleaned = await bodyWithout(ctx, name, scope);
  if (!cleaned) return;
  ctx.setUpstreamBody(cleaned.body);
  ctx.setUpstreamHeader('content-type', cleaned.contentType);
}

/** Headers of which Node keeps the first and drops any repeat (IncomingMessage): only the raw headers show one. */
const FIRST_KEPT = new Set([
  'age', 'authorization', 'content-length', 'content-type', 'etag', 'expires', 'from', 'host', 'if-modified-since', 'if-unmodified-since',
  'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer', 'retry-after', 'server', 'user-agent',
]);

/**
 * The values of a request header, in the order sent. Names compare case-insensitively with `-` and `_`
 * equivalent (nginx with `underscores_in_headers on`, as Kong runs it). Node joins repeated headers with
 * ", " or keeps the first only (FIRST_KEPT), so such values are read from the raw headers, which keep each
 * one as sent.
 */
export function headerValues(ctx: RequestView, name: string): string[] {
  const lower = name.toLowerCase();
  const direct = ctx.headers[lower];
  if (typeof direct === 'string' && !direct.includes(',') && !FIRST_KEPT.has(lower)) return [direct];
  if (Array.isArray(direct)) return direct;
  // Only names with `-` or `_` have other spellings to look for.
  if (direct === undefined && !/[-_]/.test(lower)) return [];
  const wanted = canonicalHeaderName(lower);
  const raw = downstreamRequestOf(ctx).rawHeaders;
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (canonicalHeaderName(raw[i]) === wanted) values.push(raw[i + 1]);
  return values;
}

/**
 * The request target and HTTP version as the client sent them (nginx's `$request_uri`, and `1.0`, `1.1` or
 * `2.0`): what a signature over the request line covers, before the gateway normalizes the path.
 */
export function requestLine(ctx: RequestView): { target: string; httpVersion: string } {
  const { rawPath, raw } = ctx as CoreContext;
  // A `?` with nothing after it is part of the target too.
  const hasQuery = ctx.rawQuery !== '' || raw.req.url?.includes('?');
  return { target: hasQuery ? `${rawPath}?${ctx.rawQuery}` : rawPath, httpVersion: raw.req.httpVersion };
}

/**
 * nginx's `$request_length` without the body: the request line and the header block, counted in their
 * HTTP/1.1 form (an HTTP/2 request as if it had come that way). Kong's bandwidth and log sizes add the body.
 */
export function requestHeadLength(ctx: RequestView): number {
  const { target, httpVersion } = requestLine(ctx);
  // "METHOD target HTTP/x.y\r\n", each "name: value\r\n", the blank line.
  let length = ctx.method.length + 1 + target.length + 6 + httpVersion.length + 2 + 2;
  const raw = downstreamRequestOf(ctx).rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) if (!raw[i].startsWith(':')) length += raw[i].length + 2 + raw[i + 1].length + 2;
  return length;
}

/**
 * nginx's `$bytes_sent` less the body: the status line and the header block of an answer as the response
 * phase sees it, in HTTP/1.1 form (the latency and request id headers, added later, and those Node adds on
 * the wire itself, Connection and a missing Date, are not counted).
 */
export function responseHeadLength(head: ResponseHead): number {
  // "HTTP/1.1 200 OK\r\n", each "name: value\r\n", the blank line.
  let length = 9 + 3 + 1 + (STATUS_CODES[head.status]?.length ?? 0) + 2 + 2;
  for (const [name, value] of Object.entries(head.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) length += name.length + 2 + String(v).length + 2;
  }
  return length;
}

/** The first value of a header (see headerValues), with the name it came under. */
export function findHeader(ctx: RequestView, name: string): { name: string; value: string } | undefined {
  const lower = name.toLowerCase();
  const direct = ctx.headers[lower];
  if (typeof direct === 'string' && !direct.includes(',')) return { name: lower, value: direct };
  if (direct === undefined && !/[-_]/.test(lower)) return undefined;
  const wanted = canonicalHeaderName(lower);
  const raw = downstreamRequestOf(ctx).rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) if (canonicalHeaderName(raw[i]) === wanted) return { name: raw[i].toLowerCase(), value: raw[i + 1] };
  return undefined;
}

function canonicalHeaderName(name: string): string {
  return name.toLowerCase().replace(/_/g, '-');
}
