/**
 * Kong's opentelemetry config (kong/plugins/opentelemetry/schema.lua, with typedefs.queue and the
 * propagation record of kong/observability/tracing/propagation/schema.lua), so Kong files load unchanged.
 * What Tollgate does not do is refused by name rather than ignored: OTLP logs, and the datadog and
 * instana header formats.
 */
import { HEADER_NAME, QUEUE_SCHEMA, queueSettingsProblems, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

/** Kong's header formats (propagation/utils.lua FORMATS); b3-single is only ever injected. */
export const INJECT_FORMATS = ['w3c', 'b3', 'b3-single', 'jaeger', 'ot', 'aws', 'gcp', 'datadog', 'instana'] as const;
const EXTRACT_FORMATS = INJECT_FORMATS.filter((f) => f !== 'b3-single');
const UNSUPPORTED_FORMATS = new Set(['datadog', 'instana']);

/** Kong's typedefs.timeout: milliseconds. */
const timeout = (fallback: number) => ({ type: 'integer', default: fallback, between: [0, 2 ** 31 - 2] }) as const;

const endpoint = { type: 'string', len_min: 1, custom: endpointProblem } as const;

export const configSchema = {
  type: 'record',
  fields: {
    traces_endpoint: endpoint,
    logs_endpoint: endpoint,
    /** Kong's deprecated name of traces_endpoint. */
    endpoint,
    headers: { type: 'map', keys: HEADER_NAME, values: { type: 'string', required: true } },
    resource_attributes: {
      type: 'map',
      keys: { type: 'string', len_min: 1 },
      values: { type: 'string', required: true, len_min: 1 },
    },
    // Kong's default queue of this plugin sends 200 spans a batch.
    queue: {
      ...QUEUE_SCHEMA,
      default: {
        max_batch_size: 200,
        max_coalescing_delay: 1,
        max_entries: 10_000,
        max_retry_time: 60,
        initial_retry_delay: 0.01,
        max_retry_delay: 60,
        concurrency_limit: 1,
      },
    },
    /** Deprecated: queue.max_batch_size. */
    batch_span_count: { type: 'integer', between: [1, 1_000_000] },
    /** Deprecated: queue.max_coalescing_delay (seconds). */
    batch_flush_delay: { type: 'integer', between: [0, 3600] },
    connect_timeout: timeout(1000),
    send_timeout: timeout(5000),
    read_timeout: timeout(5000),
    http_response_header_for_traceid: HEADER_NAME,
    header_type: { type: 'string', default: 'preserve', one_of: ['preserve', 'ignore', ...EXTRACT_FORMATS] },
    sampling_rate: { type: 'number', between: [0, 1] },
    propagation: {
      type: 'record',
      fields: {
        extract: { type: 'array', elements: { type: 'string', required: true, one_of: EXTRACT_FORMATS } },
        clear: { type: 'array', elements: { ...HEADER_NAME, required: true } },
        inject: {
          type: 'array',
          elements: { type: 'string', required: true, one_of: ['preserve', ...INJECT_FORMATS] },
        },
        default_format: { type: 'string', required: true, default: 'w3c', one_of: INJECT_FORMATS },
      },
    },
  },
} as const satisfies RecordSchema;

export type OpenTelemetryConfig = Infer<typeof configSchema>;
export type HeaderFormat = (typeof INJECT_FORMATS)[number];

export function checkConfig(config: OpenTelemetryConfig): Issue[] {
  const issues: Issue[] = [];
  if (!config.traces_endpoint && !config.endpoint && !config.logs_endpoint) {
    issues.push({ path: [], message: "at least one of these fields must be non-empty: 'traces_endpoint', 'logs_endpoint'" });
  }
  if (config.logs_endpoint) issues.push({ path: ['logs_endpoint'], message: 'Tollgate exports traces only, not OTLP logs: use traces_endpoint, and a logging plugin for logs' });
  const named: [(string | number)[], string | null | undefined][] = [
    [['header_type'], config.header_type],
    [['propagation', 'default_format'], config.propagation.default_format],
    ...(config.propagation.extract ?? []).map((f, i): [(string | number)[], string | null] => [['propagation', 'extract', i], f]),
    ...(config.propagation.inject ?? []).map((f, i): [(string | number)[], string | null] => [['propagation', 'inject', i], f]),
  ];
  for (const [path, format] of named) {
    if (format && UNSUPPORTED_FORMATS.has(format)) issues.push({ path, message: `Tollgate does not implement the ${format} header format: use w3c, b3, b3-single, jaeger, ot, aws or gcp` });
  }
  return [...issues, ...queueSettingsProblems(config.queue)];
}

/** Kong's typedefs.url, for an OTLP/HTTP receiver: an absolute http or https URL. */
function endpointProblem(value: string): string | undefined {
  return URL.canParse(value) && /^https?:$/.test(new URL(value).protocol) ? undefined : 'must be an absolute http or https URL';
}
