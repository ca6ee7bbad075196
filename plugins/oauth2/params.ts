/**
 * Kong's `retrieve_parameters` for the endpoints: query arguments merged with the parsed body (the body
 * wins), read with the toolkit's bounds (RequestLimitError beyond them).
 */
import { MAX_PARAMETERS, mediaType, parseArgs, readBodyParams, type AccessContext, type Params } from '../../src/pdk/index.ts';

export interface RequestParams {
  params: Params;
  /** A query, form or multipart parameter sent more than once (RFC 6749 §3.1, §3.2 forbid it), if any. */
  repeated: string | undefined;
}

/** Query and body parameters together, the body winning; RequestLimitError beyond the limits. */
export async function readParams(ctx: AccessContext): Promise<RequestParams> {
  const query = parseArgs(ctx.rawQuery, MAX_PARAMETERS);
  const body = await readBodyParams(ctx);
  // Only JSON values can be arrays by themselves; elsewhere an array is a repeated key.
  const repeated = firstArrayKey(query) ?? (mediaType(ctx.headers['content-type']) === 'application/json' ? undefined : firstArrayKey(body));
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
