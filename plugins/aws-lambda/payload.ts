/**
 * The JSON a Lambda function is invoked with (Kong's request-util.lua build_request_payload): API Gateway's
 * proxy event (awsgateway_compatible), the forward_request_* fields, or by default the query arguments
 * merged with the body's parameters.
 */
import { parseArgs, readBodyParams, MAX_PARAMETERS, mediaType, type AccessContext, type Params } from '../../src/pdk/index.ts';
import type { AwsLambdaConfig } from './schema.ts';

/** Bodies larger than nginx's client_body_buffer_size (Kong's 8k) go to disk in Kong: skip_large_bodies leaves them out. */
export const BUFFERED_BODY_BYTES = 8 * 1024;

/** Bodies Kong forwards as text even with base64_encode_body. */
const RAW_CONTENT_TYPES = new Set(['text/plain', 'text/html', 'application/xml', 'text/xml', 'application/soap+xml']);
/** The bodies kong.request.get_body parses. */
const PARSED_CONTENT_TYPES = new Set(['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']);

export async function requestPayload(ctx: AccessContext, config: AwsLambdaConfig): Promise<Record<string, unknown>> {
  if (config.awsgateway_compatible) return apiGatewayEvent(ctx, config);
  const forwards = config.forward_request_body || config.forward_request_headers || config.forward_request_method || config.forward_request_uri;
  if (forwards) return forwardedRequest(ctx, config);
  return { ...queryArgs(ctx), ...(await readBodyParams(ctx, { anyMethod: true })) };
}

async function forwardedRequest(ctx: AccessContext, config: AwsLambdaConfig): Promise<Record<string, unknown>> {
  const payload: Record<string, unknown> = {};
  if (config.forward_request_method) payload.request_method = ctx.method;
  if (config.forward_request_headers) payload.request_headers = singleHeaders(ctx);
  if (config.forward_request_uri) {
    payload.request_uri = ctx.rawQuery ? `${ctx.path}?${ctx.rawQuery}` : ctx.path;
    payload.request_uri_args = queryArgs(ctx);
  }
  if (config.forward_request_body) {
    const contentType = mediaType(ctx.headers['content-type']);
    const raw = (await bodyOf(ctx, config)) ?? Buffer.alloc(0);
    if (PARSED_CONTENT_TYPES.has(contentType)) {
      payload.request_body = raw.toString('utf8');
      payload.request_body_args = await readBodyParams(ctx, { anyMethod: true });
    } else if (!RAW_CONTENT_TYPES.has(contentType) && config.base64_encode_body) {
      // Kong does not know what this is: base64, just in case.
      payload.request_body = raw.toString('base64');
      payload.request_body_base64 = true;
      payload.request_body_args = {};
    } else {
      payload.request_body = raw.toString('utf8');
      payload.request_body_args = {};
    }
  }
  return payload;
}

/** API Gateway's REST API proxy event, version 1.0 (Kong's aws_serializer). */
async function apiGatewayEvent(ctx: AccessContext, config: AwsLambdaConfig): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = {};
  const multiValueHeaders: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(ctx.headers)) {
    if (value === undefined) continue;
    const values = Array.isArray(value) ? value : [value];
    headers[name] = values[0];
    multiValueHeaders[name] = values;
  }
  const queryStringParameters: Record<string, unknown> = {};
  const multiValueQueryStringParameters: Record<string, unknown[]> = {};
  for (const [name, value] of Object.entries(queryArgs(ctx))) {
    const values = Array.isArray(value) ? value : [value];
    queryStringParameters[name] = values[0];
    multiValueQueryStringParameters[name] = values;
  }
  const raw = await bodyOf(ctx, config);
  const encode = raw !== undefined && raw.length > 0 && config.base64_encode_body;
  const path = ctx.path;
  const startedAt = new Date(performance.timeOrigin + ctx.startedAt);
  return {
    version: '1.0',
    resource: ctx.matchedPrefix || null,
    path,
    httpMethod: ctx.method,
    headers,
    multiValueHeaders,
    pathParameters: Object.fromEntries(Object.entries(ctx.uriCaptures).filter(([name]) => !/^\d+$/.test(name))),
    queryStringParameters,
    multiValueQueryStringParameters,
    body: encode ? raw.toString('base64') : (raw?.toString('utf8') ?? null),
    isBase64Encoded: encode,
    requestContext: {
      path,
      protocol: `HTTP/${ctx.httpVersion === '2' ? '2.0' : '1.1'}`,
      httpMethod: ctx.method,
      domainName: ctx.host,
      domainPrefix: ctx.host.split('.')[0],
      identity: { sourceIp: ctx.clientIp, userAgent: headers['user-agent'] ?? null },
      requestId: ctx.id,
      requestTime: clfTime(startedAt),
      requestTimeEpoch: startedAt.getTime(),
      resourcePath: path,
    },
  };
}

/** The body, or undefined when skip_large_bodies leaves a large one out (Kong: one nginx buffered to disk). */
async function bodyOf(ctx: AccessContext, config: AwsLambdaConfig): Promise<Buffer | undefined> {
  return config.skip_large_bodies === false ? ctx.readBody() : ctx.readBodyWithin(BUFFERED_BODY_BYTES);
}

function queryArgs(ctx: AccessContext): Params {
  return parseArgs(ctx.rawQuery, MAX_PARAMETERS);
}

/** Kong's kong.request.get_headers(): one value per name, a list for repeated ones. */
function singleHeaders(ctx: AccessContext): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(ctx.headers).filter(([, v]) => v !== undefined)) as Record<string, string | string[]>;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** The Common Log Format's time, in UTC: `29/Nov/2026:15:23:34 +0000`. */
function clfTime(date: Date): string {
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(date.getUTCDate())}/${MONTHS[date.getUTCMonth()]}/${date.getUTCFullYear()}:${two(date.getUTCHours())}:${two(date.getUTCMinutes())}:${two(date.getUTCSeconds())} +0000`;
}
