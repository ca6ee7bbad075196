/**
 * Kong's opentelemetry traces (kong/plugins/opentelemetry/traces.lua with the core's request and balancer
 * instrumentation): in access, the trace context is read from the client's headers, the sampling decided
 * and the context injected into the upstream request, naming the upstream call's span as the parent; in the
 * log phase a sampled request's spans — `kong` (server) and `kong.balancer` (client, when it went upstream)
 * — go to the instance's queue, on to the OTLP/HTTP receiver.
 */
import { randomBytes } from 'node:crypto';
import { requestLine, type LogContext, type PluginApi, type PluginInstance, type PluginRuntime, type RequestView } from '../../src/pdk/index.ts';
import { SpanQueue, type ExportTarget } from './exporter.ts';
import { SPAN_KIND, STATUS_ERROR, type Span } from './otlp.ts';
import { extract, inject, resolveInjected, SPAN_ID_BYTES, TRACE_ID_BYTES, type Propagation } from './propagation.ts';
import type { OpenTelemetryConfig } from './schema.ts';

/** The Kong version the resource reports (`service.version`), as the prometheus plugin's. */
const KONG_VERSION = '3.10.0';
const TRACE = 'opentelemetry.trace';

/** One request's trace, made in access (or in the log phase when an earlier plugin answered first). */
interface RequestTrace {
  traceId: Buffer;
  rootSpanId: Buffer;
  /** The span of the client that called us, from its headers. */
  rootParentId: Buffer | undefined;
  balancerSpanId: Buffer;
  sampled: boolean;
}

export function createRuntime(api: PluginApi): PluginRuntime<OpenTelemetryConfig, Propagation> {
  const queues = new Map<string, SpanQueue>();
  const dropped = api.metrics.counter({ name: 'tollgate_opentelemetry_spans_dropped_total', help: 'Spans dropped because the queue of an opentelemetry instance was full' });
  const queueOf = (instance: PluginInstance<OpenTelemetryConfig>): SpanQueue => {
    const name = `${instance.config.queue.name ?? instance.id}:traces`;
    let queue = queues.get(name);
    if (!queue) queues.set(name, (queue = new SpanQueue(name, api.log, (n) => dropped.inc(n))));
    return queue;
  };
  const resource = (config: OpenTelemetryConfig) => ({ 'service.name': 'kong', 'service.instance.id': api.nodeId, 'service.version': KONG_VERSION, ...config.resource_attributes });
  return {
    access(ctx, config, plugin) {
      const propagation = plugin.prepared;
      const found = extract(propagation.extract, ctx.headers);
      const trace = newTrace(config, found?.context.traceId, found?.context.sampled);
      trace.rootParentId = found?.context.spanId ?? found?.context.parentId;
      ctx.shared[TRACE] = trace;
      for (const name of propagation.clear) ctx.removeUpstreamHeader(name);
      // The upstream sees the upstream call's span as its parent, as Kong's balancer span.
      const injected = { ...found?.context, traceId: trace.traceId, spanId: trace.balancerSpanId, parentId: trace.rootSpanId, sampled: trace.sampled };
      const traceIds: Record<string, string> = {};
      for (const format of resolveInjected(propagation, found?.format, found?.context.b3Single ?? false)) {
        const written = inject(format, injected);
        if (!written) continue;
        for (const [name, value] of Object.entries(written.headers)) ctx.setUpstreamHeader(name, value);
        traceIds[written.traceId[0]] = written.traceId[1];
      }
      if (Object.keys(traceIds).length > 0) ctx.setLogValue('trace_id', traceIds);
    },
    response(ctx, config, head) {
      if (config.http_response_header_for_traceid) head.headers[config.http_response_header_for_traceid.toLowerCase()] = traceOf(ctx, config).traceId.toString('hex');
    },
    log(ctx, config, plugin) {
      const endpoint = config.traces_endpoint ?? config.endpoint;
      const trace = traceOf(ctx, config);
      if (!endpoint || !trace.sampled) return;
      const target: ExportTarget = {
        endpoint,
        headers: config.headers ?? {},
        resource: resource(config),
        connectTimeoutMs: config.connect_timeout,
        sendTimeoutMs: config.send_timeout,
        readTimeoutMs: config.read_timeout,
        // The deprecated fields still say how batches are made when set, as in Kong.
        queue: {
          ...config.queue,
          max_batch_size: config.batch_span_count ?? config.queue.max_batch_size,
          max_coalescing_delay: config.batch_flush_delay ?? config.queue.max_coalescing_delay,
        },
      };
      queueOf(plugin).add(spansOf(ctx, trace), target);
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
    },
  };
}

/** Kong's sampling: a client's "not sampled" is kept; otherwise the trace id decides against the rate. */
function newTrace(config: OpenTelemetryConfig, traceId: Buffer = randomBytes(TRACE_ID_BYTES), parentSampled?: boolean): RequestTrace {
  const sampled = parentSampled === false ? false : sampledAt(traceId, config.sampling_rate ?? 1);
  return { traceId, rootSpanId: randomBytes(SPAN_ID_BYTES), rootParentId: undefined, balancerSpanId: randomBytes(SPAN_ID_BYTES), sampled };
}

/** Kong's probability sampler: the trace id's first 8 bytes, read as a little-endian integer, under rate × 2^64. */
function sampledAt(traceId: Buffer, rate: number): boolean {
  if (rate >= 1) return true;
  if (rate <= 0) return false;
  return Number(traceId.readBigUInt64LE(0)) < rate * 2 ** 64;
}

/** The request's trace; one is started when access never ran (an earlier plugin answered), as Kong's core span is. */
function traceOf(ctx: RequestView, config: OpenTelemetryConfig): RequestTrace {
  return ((ctx.shared[TRACE] as RequestTrace | undefined) ??= newTrace(config));
}

function spansOf(ctx: LogContext, trace: RequestTrace): Span[] {
  const { outcome } = ctx;
  const startNs = epochNs(ctx.startedAt);
  const endNs = epochNs(performance.now());
  const root: Span = {
    traceId: trace.traceId,
    spanId: trace.rootSpanId,
    parentSpanId: trace.rootParentId,
    name: 'kong',
    kind: SPAN_KIND.server,
    startTimeNs: startNs,
    endTimeNs: endNs,
    attributes: {
      'http.method': ctx.method,
      // Kong's: the scheme, $host and $request_uri (the target as the client sent it).
      'http.url': `${ctx.scheme}://${ctx.host}${requestLine(ctx).target}`,
      'http.host': ctx.host,
      'http.scheme': ctx.scheme,
      'http.flavor': ctx.httpVersion === '2' ? '2.0' : ctx.httpVersion,
      'http.client_ip': ctx.clientIp,
      'net.peer.ip': ctx.clientIp,
      'kong.request.id': ctx.id,
      'http.status_code': outcome.status,
      'http.route': ctx.route.paths?.[0] ?? '',
    },
  };
  // A request a plugin answered never went upstream: no balancer span.
  if (!ctx.service || outcome.source === 'exit') return [root];
  const failed = outcome.upstreamStatus === undefined;
  const balancer: Span = {
    traceId: trace.traceId,
    spanId: trace.balancerSpanId,
    parentSpanId: trace.rootSpanId,
    name: 'kong.balancer',
    kind: SPAN_KIND.client,
    startTimeNs: startNs + BigInt(Math.round(outcome.latencies.kong * 1e6)),
    endTimeNs: endNs,
    attributes: { try_count: 1, 'net.peer.name': ctx.service.host, ...(failed ? { 'http.status_code': outcome.status } : {}) },
    statusCode: failed ? STATUS_ERROR : undefined,
  };
  return [root, balancer];
}

/** A `performance.now()` time as nanoseconds since the epoch. */
function epochNs(at: number): bigint {
  return BigInt(Math.round((performance.timeOrigin + at) * 1e6));
}
