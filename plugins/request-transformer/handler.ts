/**
 * Kong's request-transformer access.lua: in this order the upstream path (`replace.uri`), the method
 * (`http_method`; to GET/HEAD/TRACE a form body's fields join the query), the headers, the body (JSON or
 * form, up to BODY_LIMIT) and the query are changed: remove, rename, replace (only what exists), add (only
 * what is missing), append. Templates read the request as the client sent it.
 */
import { parseUntrustedJson, type AccessContext, type PluginRuntime } from '../../src/pdk/index.ts';
import { splitPair, type RequestTransformerConfig } from './schema.ts';
import { Template, type TemplateSources } from './templates.ts';

/** Bodies larger than this are sent upstream untouched, as Kong leaves the bodies nginx spooled to disk. */
const BODY_LIMIT = 1024 * 1024;

type Value = string | string[];
type Pair = [name: string, value: Template];

interface Operations<T> {
  remove: string[];
  rename: [from: string, to: string][];
  replace: T[];
  add: T[];
  append: T[];
}

/** An instance's operations with their templates parsed, once per configuration. */
export interface Compiled {
  headers: Operations<Pair>;
  query: Operations<Pair>;
  body: Operations<Pair>;
  uri: Template | undefined;
}

export function createRuntime(): PluginRuntime<RequestTransformerConfig, Compiled> {
  return {
    access(ctx, config, plugin) {
      const c = plugin.prepared;
      const sources = templateSources(ctx);
      if (c.uri) ctx.setUpstreamPath(c.uri.render(sources));
      const method = config.http_method ?? undefined;
      if (method) ctx.setUpstreamMethod(method);
      // The body is read as the type the headers have once transformed (Kong reads them back after setting them).
      const type = bodyType(transformHeaders(ctx, c.headers, sources));
      const bodyToQuery = type === 'form' && (method === 'GET' || method === 'HEAD' || method === 'TRACE');
      const bodyChanges = type !== undefined && hasOperations(c.body);
      if (!bodyChanges && !bodyToQuery) return transformQuery(ctx, c.query, sources, undefined);
      return ctx.readBodyWithin(BODY_LIMIT).then((body) => {
        if (body !== undefined && bodyChanges) transformBody(ctx, type!, body, c.body, sources);
        transformQuery(ctx, c.query, sources, bodyToQuery && body !== undefined ? decodeArgs(body.toString('utf8')) : undefined);
      });
    },
  };
}

export function compileOperations(config: RequestTransformerConfig): Compiled {
  const section = (key: 'body' | 'headers' | 'querystring'): Operations<Pair> => ({
    remove: config.remove[key],
    rename: config.rename[key].map(splitPair),
    replace: config.replace[key].map(pair),
    add: config.add[key].map(pair),
    append: config.append[key].map(pair),
  });
  return { headers: section('headers'), query: section('querystring'), body: section('body'), uri: config.replace.uri ? Template.parse(config.replace.uri) : undefined };
}

function pair(text: string): Pair {
  const [name, value] = splitPair(text);
  return [name, Template.parse(value)];
}

function hasOperations(o: Operations<Pair>): boolean {
  return o.remove.length + o.rename.length + o.replace.length + o.add.length + o.append.length > 0;
}

function templateSources(ctx: AccessContext): TemplateSources {
  return {
    header: (name) => ctx.headers[name.toLowerCase()],
    query: (name) => {
      const values = ctx.query.getAll(name);
      return values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
    },
    uriCapture: (name) => ctx.uriCaptures[name],
    shared: (name) => ctx.shared[name],
  };
}

/** Kong's append_value: a value becomes a list, a list grows. */
function appended(current: Value | undefined, value: string): Value {
  return current === undefined ? [value] : Array.isArray(current) ? [...current, value] : [current, value];
}

/** The five operations over a map of names to values (names compared as `key` makes them). */
function apply(
  values: Map<string, Value>,
  o: Operations<Pair>,
  sources: TemplateSources,
  key: (name: string) => string,
  canReplace: (name: string) => boolean = (n) => values.has(n),
  canAdd: (name: string) => boolean = (n) => !values.has(n),
): void {
  for (const name of o.remove) values.delete(key(name));
  for (const [from, to] of o.rename) {
    const value = values.get(key(from));
    if (value === undefined || key(from) === key(to)) continue;
    values.delete(key(from));
    values.set(key(to), value);
  }
  for (const [name, template] of o.replace) if (canReplace(key(name))) values.set(key(name), template.render(sources));
  for (const [name, template] of o.add) if (canAdd(key(name))) values.set(key(name), template.render(sources));
  for (const [name, template] of o.append)
    values.set(key(name), appended(values.get(key(name)), template.render(sources)));
}

/** Returns the Content-Type the upstream request will have. */
function transformHeaders(ctx: AccessContext, o: Operations<Pair>, sources: TemplateSources): string | undefined {
  const contentType = ctx.headers['content-type'];
  if (!hasOperations(o)) return contentType;
  const before = new Map<string, Value>();
  for (const [name, value] of Object.entries(ctx.headers)) if (value !== undefined && name[0] !== ':' && name !== 'host') before.set(name, value);
  const after = new Map(before);
  // Host is replaced (it names the upstream host), never added or appended to.
  apply(after, { ...o, append: o.append.filter(([n]) => n.toLowerCase() !== 'host') }, sources, (n) => n.toLowerCase(), (n) => after.has(n) || n === 'host', (n) => !after.has(n) && n !== 'host');
  for (const name of before.keys()) if (!after.has(name)) ctx.removeUpstreamHeader(name);
  for (const [name, value] of after) if (before.get(name) !== value) ctx.setUpstreamHeader(name, value);
  const type = after.get('content-type');
  return Array.isArray(type) ? type[0] : type;
}

function transformQuery(ctx: AccessContext, o: Operations<Pair>, sources: TemplateSources, fromBody: Map<string, Value> | undefined): void {
  if (!hasOperations(o) && !fromBody) return;
  const query = decodeArgs(ctx.rawQuery);
  for (const [name, value] of fromBody ?? []) {
    const current = query.get(name);
    query.set(name, current === undefined ? value : [...[current].flat(), ...[value].flat()]);
  }
  apply(query, o, sources, (n) => n);
  ctx.setUpstreamQuery(encodeArgs(query));
}

type BodyType = 'json' | 'form';

function bodyType(contentType: string | undefined): BodyType | undefined {
  const type = contentType?.toLowerCase() ?? '';
  if (type.includes('application/json')) return 'json';
  if (type.includes('application/x-www-form-urlencoded')) return 'form';
  // Kong also rewrites multipart/form-data; Tollgate passes it on untouched.
  return undefined;
}

function transformBody(ctx: AccessContext, type: BodyType, raw: Buffer, o: Operations<Pair>, sources: TemplateSources): void {
  // Kong changes what a body has (remove, rename, replace) only when there is a body.
  const ops = raw.length > 0 ? o : { ...o, remove: [], rename: [], replace: [] };
  if (type === 'form') {
    const fields = decodeArgs(raw.toString('utf8'));
    apply(fields, ops, sources, (n) => n);
    return ctx.setUpstreamBody(Buffer.from(encodeArgs(fields)));
  }
  let parsed: unknown = {};
  if (raw.length > 0) {
    try {
      parsed = parseUntrustedJson(raw.toString('utf8'));
    } catch {
      return; // a malformed or too deep body goes upstream as it came, as Kong's cjson.safe decode leaves it
    }
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return;
  const fields = new Map(Object.entries(parsed as Record<string, Value>));
  apply(fields, ops, sources, (n) => n);
  ctx.setUpstreamBody(Buffer.from(JSON.stringify(Object.fromEntries(fields))));
}

/** `a=1&a=2&b` → a: [1, 2], b: '' (repeated names as lists, in order). */
function decodeArgs(text: string): Map<string, Value> {
  const out = new Map<string, Value>();
  for (const [name, value] of new URLSearchParams(text)) {
    const current = out.get(name);
    out.set(name, current === undefined ? value : appended(current, value));
  }
  return out;
}

/** Kong's encode_args: names sorted, lists repeated, everything but unreserved characters escaped. */
function encodeArgs(values: Map<string, Value>): string {
  const escape = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
  return [...values.keys()]
    .sort()
    .flatMap((name) => [values.get(name)!].flat().map((v) => `${escape(name)}=${escape(v)}`))
    .join('&');
}
