/**
 * Kong's response-transformer (handler.lua, header_transformer.lua, body_transformer.lua): the answer's
 * headers, then its JSON body, changed in the order remove, rename, replace (only what is set), add (only
 * what is not), append. It applies to every answer of its routes, the gateway's own included.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { parseUntrustedJson, type PluginRuntime } from '../../src/pdk/index.ts';
import { splitPair, type JsonType, type ResponseTransformerConfig } from './schema.ts';

export function createRuntime(): PluginRuntime<ResponseTransformerConfig> {
  return {
    response(_ctx, config, head) {
      transformHeaders(config, head.headers);
      if (!bodyTransformed(config) || !isJson(head.headers['content-type'])) return;
      // The body changes: its length is set again from the result.
      delete head.headers['content-length'];
      head.rewriteBody?.((body) => transformJson(config, body));
    },
  };
}

function bodyTransformed(c: ResponseTransformerConfig): boolean {
  return c.add.json.length + c.rename.json.length + c.remove.json.length + c.replace.json.length + c.append.json.length > 0;
}

/** Kong's is_json_body: one of the comma-separated media types is application/json. */
function isJson(contentType: OutgoingHttpHeaders[string]): boolean {
  if (contentType === undefined) return false;
  return String(contentType)
    .split(',')
    .some((type) => type.split(';')[0].trim().toLowerCase() === 'application/json');
}

function transformHeaders(c: ResponseTransformerConfig, headers: OutgoingHttpHeaders): void {
  const key = (name: string) => name.toLowerCase();
  for (const name of c.remove.headers) delete headers[key(name)];
  for (const [from, to] of c.rename.headers.map(splitPair)) {
    const value = headers[key(from)];
    if (value === undefined || !to) continue;
    delete headers[key(from)];
    headers[key(to)] = value;
  }
  for (const [name, value] of c.replace.headers.map(splitPair)) if (headers[key(name)] !== undefined && value !== undefined) headers[key(name)] = value;
  for (const [name, value] of c.add.headers.map(splitPair)) if (headers[key(name)] === undefined && value !== undefined) headers[key(name)] = value;
  for (const [name, value] of c.append.headers.map(splitPair)) {
    if (value === undefined) continue;
    const prior = headers[key(name)];
    headers[key(name)] = prior === undefined ? value : [...[prior].flat().map(String), value];
  }
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Lua's truth, which Kong's checks use: only nil (absent, null) and false are false. */
const truthy = (v: Json | undefined): boolean => v !== undefined && v !== null && v !== false;

/** Kong's json_value: the configured text, as the json_types entry at the same position says. */
function typedValue(value: string, type: JsonType | undefined): Json | undefined {
  if (type === 'number') {
    const n = Number(value);
    return value.trim() === '' || Number.isNaN(n) ? undefined : n;
  }
  if (type === 'boolean') return value === 'true';
  return value;
}

function transformJson(c: ResponseTransformerConfig, raw: Buffer): Buffer {
  let body: Json;
  try {
    body = parseUntrustedJson(raw.toString('utf8')) as Json;
  } catch {
    return raw; // Kong logs "failed parsing json body" (malformed or too deep) and sends it as it came
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return raw;
  const json = body;
  for (const name of c.remove.json) delete json[name];
  for (const [from, to] of c.rename.json.map(splitPair)) {
    if (json[from] === undefined || !to) continue;
    const value = json[from];
    delete json[from];
    json[to] = value;
  }
  const each = (op: 'replace' | 'add' | 'append', apply: (name: string, value: Json) => void) => {
    for (const [i, pair] of c[op].json.entries()) {
      const [name, text] = splitPair(pair);
      const value = text === undefined ? undefined : typedValue(text, c[op].json_types[i]);
      if (value !== undefined) apply(name, value);
    }
  };
  each('replace', (name, value) => truthy(json[name]) && (json[name] = value));
  each('add', (name, value) => !truthy(json[name]) && (json[name] = value));
  each('append', (name, value) => {
    const prior = json[name];
    json[name] = Array.isArray(prior) ? [...prior, value] : typeof prior === 'string' ? [prior, value] : [value];
  });
  return Buffer.from(JSON.stringify(json));
}
