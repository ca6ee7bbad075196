/** Kong's statsd config (kong/plugins/statsd/schema.lua), with Kong's default metrics and typedefs.queue. */
import { QUEUE_SCHEMA, queueSettingsProblems, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

export const METRIC_NAMES = [
  'kong_latency', 'latency', 'request_count', 'request_per_user', 'request_size', 'response_size', 'status_count', 'status_count_per_user',
  'unique_users', 'upstream_latency', 'status_count_per_workspace', 'status_count_per_user_per_route', 'shdict_usage',
] as const;
const STAT_TYPES = ['counter', 'gauge', 'histogram', 'meter', 'set', 'timer'] as const;
const CONSUMER_IDENTIFIERS = ['consumer_id', 'custom_id', 'username'] as const;
const SERVICE_IDENTIFIERS = ['service_id', 'service_name', 'service_host', 'service_name_or_host'] as const;
const WORKSPACE_IDENTIFIERS = ['workspace_id', 'workspace_name'] as const;

/** Kong's DEFAULT_METRICS, in its order. */
const DEFAULT_METRICS = [
  { name: 'request_count', stat_type: 'counter', sample_rate: 1 },
  { name: 'latency', stat_type: 'timer' },
  { name: 'request_size', stat_type: 'counter', sample_rate: 1 },
  { name: 'status_count', stat_type: 'counter', sample_rate: 1 },
  { name: 'response_size', stat_type: 'counter', sample_rate: 1 },
  { name: 'unique_users', stat_type: 'set' },
  { name: 'request_per_user', stat_type: 'counter', sample_rate: 1 },
  { name: 'upstream_latency', stat_type: 'timer' },
  { name: 'kong_latency', stat_type: 'timer' },
  { name: 'status_count_per_user', stat_type: 'counter', sample_rate: 1 },
  { name: 'status_count_per_workspace', stat_type: 'counter', sample_rate: 1 },
  { name: 'status_count_per_user_per_route', stat_type: 'counter', sample_rate: 1 },
  { name: 'shdict_usage', stat_type: 'gauge', sample_rate: 1 },
];

export const configSchema = {
  type: 'record',
  fields: {
    host: { type: 'string', default: 'localhost', len_min: 1 },
    port: { type: 'integer', default: 8125, between: [0, 65535] },
    prefix: { type: 'string', default: 'kong' },
    metrics: {
      type: 'array',
      default: () => DEFAULT_METRICS.map((m) => ({ ...m })),
      elements: {
        type: 'record',
        required: true,
        fields: {
          name: { type: 'string', required: true, one_of: METRIC_NAMES },
          stat_type: { type: 'string', required: true, one_of: STAT_TYPES },
          sample_rate: { type: 'number', gt: 0 },
          consumer_identifier: { type: 'string', one_of: CONSUMER_IDENTIFIERS },
          service_identifier: { type: 'string', one_of: SERVICE_IDENTIFIERS },
          workspace_identifier: { type: 'string', one_of: WORKSPACE_IDENTIFIERS },
        },
        // Kong's conditional: counters and gauges say their sample rate.
        entity_checks: [(m) => ((m.stat_type === 'counter' || m.stat_type === 'gauge') && m.sample_rate == null ? [{ path: ['sample_rate'], message: 'required field missing' }] : [])],
      },
    },
    allow_status_codes: { type: 'array', elements: { type: 'string', required: true, match: /^[0-9]+-[0-9]+$/ } },
    udp_packet_size: { type: 'number', default: 0, between: [0, 65507] },
    use_tcp: { type: 'boolean', default: false },
    hostname_in_prefix: { type: 'boolean', default: false },
    consumer_identifier_default: { type: 'string', required: true, default: 'custom_id', one_of: CONSUMER_IDENTIFIERS },
    service_identifier_default: { type: 'string', required: true, default: 'service_name_or_host', one_of: SERVICE_IDENTIFIERS },
    workspace_identifier_default: { type: 'string', required: true, default: 'workspace_id', one_of: WORKSPACE_IDENTIFIERS },
    /** Deprecated in Kong, without effect. */
    retry_count: { type: 'integer' },
    /** Deprecated: queue.max_batch_size. */
    queue_size: { type: 'integer' },
    /** Deprecated: queue.max_coalescing_delay. */
    flush_timeout: { type: 'number' },
    tag_style: { type: 'string', one_of: ['dogstatsd', 'influxdb', 'librato', 'signalfx'] },
    queue: QUEUE_SCHEMA,
  },
} as const satisfies RecordSchema;

export type StatsdConfig = Infer<typeof configSchema>;
export type MetricConfig = StatsdConfig['metrics'][number];
export type ConsumerIdentifier = (typeof CONSUMER_IDENTIFIERS)[number];
export type ServiceIdentifier = (typeof SERVICE_IDENTIFIERS)[number];

export function checkConfig(config: StatsdConfig): Issue[] {
  return queueSettingsProblems(config.queue);
}
