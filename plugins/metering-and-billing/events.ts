/**
 * The CloudEvents of a finished request, shaped as Kong's `metering-and-billing` plugin emits them so
 * that meters written for Kong's work unchanged: one `kong.api_request` per request (a gRPC call, a
 * WebSocket session), and with AI token metering a `kong.llm_request` pair (prompt and completion
 * tokens). Built from what the gateway already knows about the exchange; nothing is parsed here.
 */
import type { LogContext, RequestView } from '../../src/pdk/index.ts';
import { boundedText, MAX_DIMENSION_VALUE_LENGTH, MAX_IDENTIFIER_LENGTH } from '../metering/public.ts';
import type { TokenUsage } from './ai-usage.ts';
import type { Attribute, RequestMeteringConfig } from './schema.ts';

export const API_REQUEST = 'kong.api_request';
export const LLM_REQUEST = 'kong.llm_request';

export interface MeteringEvent {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  data: Record<string, unknown>;
}

export interface Subject {
  value: string;
  /** What the subject is (Kong's `subject_type`): `consumer_username`, `consumer_id`, `header`, ... */
  type: string;
}

/**
 * A value the client chose, as an event carries it: at most `max` characters (a longer one is replaced by
 * its stand-in, its start and a hash of it). Every metering store takes it then, so no client can make its
 * request unmeterable with a long URL or header, and one long value always reads the same.
 */
function clientText(value: string, max = MAX_DIMENSION_VALUE_LENGTH): string {
  return boundedText(value, max);
}

/** The subject the config names, or undefined when the request has none (no event then). */
export function subjectOf(ctx: RequestView, subject: RequestMeteringConfig['subject']): Subject | undefined {
  const { look_up_value_in: source, field } = subject;
  let value: string | null | undefined;
  switch (source) {
    case 'consumer': {
      const name = (field ?? 'username') as 'username' | 'id' | 'custom_id';
      value = ctx.consumer?.[name];
      return value ? { value: clientText(value, MAX_IDENTIFIER_LENGTH), type: `consumer_${name}` } : undefined;
    }
    case 'application':
      // Tollgate has no Dev Portal applications: the credential that authenticated the call stands for one.
      value = ctx.credential?.id;
      return value ? { value, type: 'application' } : undefined;
    case 'header':
      value = firstValue(ctx.headers[field!.toLowerCase()]);
      return value ? { value: clientText(value, MAX_IDENTIFIER_LENGTH), type: 'header' } : undefined;
    case 'query':
      value = ctx.query.get(field!);
      return value ? { value: clientText(value, MAX_IDENTIFIER_LENGTH), type: 'query' } : undefined;
  }
}

function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The request's protocol as its route names them, for meters that tell calls from sessions. */
function protocolOf(ctx: RequestView): string {
  const secure = ctx.scheme === 'https';
  if (ctx.isGrpc) return secure ? 'grpcs' : 'grpc';
  if (ctx.isUpgrade) return secure ? 'wss' : 'ws';
  return ctx.scheme;
}

/** Milliseconds since the Unix epoch at which the request arrived. */
export function startedAtMs(ctx: RequestView): number {
  return performance.timeOrigin + ctx.startedAt;
}

function addAttributes(data: Record<string, unknown>, ctx: RequestView, attributes: Attribute[]): void {
  for (const a of attributes) {
    const value = a.source === 'header' ? firstValue(ctx.headers[a.look_up_value_in.toLowerCase()]) : ctx.query.get(a.look_up_value_in);
    // Kong omits an attribute the request does not carry.
    if (value !== undefined && value !== null) data[a.event_property_name] = clientText(value);
  }
}

/**
 * `kong.api_request`: one per request, call or session, with its duration (`latency_ms`) and bytes.
 * `source` is `tollgate/<node id>`: with the request id, what receivers dedupe on.
 */
export function apiRequestEvent(
  ctx: LogContext,
  config: RequestMeteringConfig,
  subject: Subject,
  source: string,
  time: string,
  endedAt: number,
): MeteringEvent {
  const route = ctx.route;
  const service = ctx.service;
  const outcome = ctx.outcome;
  const data: Record<string, unknown> = {
    client_ip: ctx.clientIp,
    request_host: clientText(ctx.host),
    request_method: ctx.method,
    request_uri: clientText(ctx.rawQuery ? `${ctx.path}?${ctx.rawQuery}` : ctx.path),
    request_protocol: protocolOf(ctx),
    request_size_bytes: outcome.requestBytes,
    response_size_bytes: outcome.responseBytes,
    // 499 (nginx's) when the client went away before any answer.
    response_http_status: outcome.status,
    route_id: route.id,
    route_name: route.name,
    service_id: service?.id ?? null,
    service_name: service?.name ?? null,
    service_port: service?.port ?? null,
    service_protocol: service?.protocol ?? null,
    subject_type: subject.type,
    latency_ms: Math.round(endedAt - ctx.startedAt),
  };
  const userAgent = firstValue(ctx.headers['user-agent']);
  if (userAgent !== undefined) data.request_user_agent = clientText(userAgent);
  if (outcome.upstreamStatus !== undefined) data.upstream_status = outcome.upstreamStatus;
  if (outcome.latencies.upstream !== undefined) data.upstream_latency_ms = outcome.latencies.upstream;
  addAttributes(data, ctx, config.attributes);
  return { specversion: '1.0', id: ctx.id, source, type: API_REQUEST, subject: subject.value, time, data };
}

/** `kong.llm_request`, twice: the prompt tokens (`type: request`) and the completion tokens (`type: response`). */
export function llmRequestEvents(
  ctx: LogContext,
  config: RequestMeteringConfig,
  subject: Subject,
  source: string,
  time: string,
  usage: TokenUsage,
): MeteringEvent[] {
  const common = {
    // The upstream's word: as unbounded as a client's.
    model: clientText(usage.model ?? ''),
    provider: 'openai',
    http_status: ctx.outcome.status,
    api_request_id: ctx.id,
    route_id: ctx.route.id,
    service_id: ctx.service?.id ?? null,
    subject_type: subject.type,
  };
  const event = (type: 'request' | 'response', tokens: number): MeteringEvent => {
    const data: Record<string, unknown> = { type, tokens, ...common };
    addAttributes(data, ctx, config.attributes);
    return {
      specversion: '1.0',
      id: `${ctx.id}:${type}`,
      source,
      type: LLM_REQUEST,
      subject: subject.value,
      time,
      data,
    };
  };
  return [event('request', usage.promptTokens), event('response', usage.completionTokens)];
}
