/**
 * The Lambda's answer as the client's (Kong's handler.lua and request-util.lua): its headers and status
 * as they come, or with is_proxy_integration the API Gateway response the function returned (statusCode,
 * headers, multiValueHeaders, body, isBase64Encoded); unhandled_status for an unhandled function error;
 * and, in empty_arrays_mode `legacy`, empty JSON arrays sent as `{}` as Kong long did.
 */
import { parseUntrustedJson } from '../../src/pdk/index.ts';
import { ProxyResponseError } from './errors.ts';
import type { LambdaAnswer } from './invoke.ts';
import type { AwsLambdaConfig } from './schema.ts';

export interface ClientAnswer {
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/** Headers of the Lambda service's own connection, and its length (the body may change). */
const NOT_RELAYED = new Set(['content-length', 'connection', 'keep-alive', 'proxy-connection', 'upgrade', 'transfer-encoding', 'date']);

export function clientAnswer(config: AwsLambdaConfig, answer: LambdaAnswer): ClientAnswer {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !NOT_RELAYED.has(name)) headers[name] = value;
  if (config.is_proxy_integration) {
    const proxied = proxyResponse(answer.body);
    return { status: proxied.status, headers: { ...headers, ...proxied.headers }, body: proxied.body };
  }
  const unhandled = config.unhandled_status != null && headers['x-amz-function-error'] === 'Unhandled';
  const legacy = config.empty_arrays_mode === 'legacy' && /application\/.*json/.test(String(headers['content-type'] ?? '').toLowerCase());
  return { status: unhandled ? config.unhandled_status! : answer.status, headers, body: legacy ? withEmptyArraysAsObjects(answer.body) : answer.body };
}

function proxyResponse(body: Buffer): ClientAnswer {
  let response: unknown;
  try {
    response = parseUntrustedJson(body.toString('utf8'));
  } catch (err) {
    throw new ProxyResponseError((err as Error).message);
  }
  if (typeof response !== 'object' || response === null || Array.isArray(response)) throw new ProxyResponseError('proxy response must be json format');
  const r = response as Record<string, unknown>;
  const status = typeof r.statusCode === 'string' ? Number(r.statusCode) : r.statusCode;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599) throw new ProxyResponseError('statusCode validation failed');
  if (r.headers != null && (typeof r.headers !== 'object' || Array.isArray(r.headers))) throw new ProxyResponseError('headers must be a table');
  if (r.body != null && typeof r.body !== 'string') throw new ProxyResponseError('body must be a string');
  if (r.isBase64Encoded != null && typeof r.isBase64Encoded !== 'boolean') throw new ProxyResponseError('isBase64Encoded must be a boolean');
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries((r.headers ?? {}) as Record<string, unknown>)) headers[name.toLowerCase()] = String(value);
  if (typeof r.multiValueHeaders === 'object' && r.multiValueHeaders !== null) {
    for (const [name, values] of Object.entries(r.multiValueHeaders)) headers[name.toLowerCase()] = (Array.isArray(values) ? values : [values]).map(String);
  }
  // A relayed length or chunking would not describe the body the gateway sends.
  delete headers['transfer-encoding'];
  delete headers['content-length'];
  const text = (r.body as string | undefined) ?? '';
  return { status, headers, body: r.isBase64Encoded === true ? Buffer.from(text, 'base64') : Buffer.from(text) };
}

/** JSON with its empty arrays as empty objects (Kong's legacy mode); a body that is not JSON is left as it is. */
function withEmptyArraysAsObjects(body: Buffer): Buffer {
  let parsed: unknown;
  try {
    parsed = parseUntrustedJson(body.toString('utf8'));
  } catch {
    return body;
  }
  const replaced = JSON.stringify(parsed, (_key, value: unknown) => (Array.isArray(value) && value.length === 0 ? {} : value));
  return Buffer.from(replaced);
}
