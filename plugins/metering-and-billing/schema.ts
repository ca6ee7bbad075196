/**
 * The plugin's `config`: Kong Gateway 3.14's `metering-and-billing` fields and defaults (Kong's plugin
 * schema, with the queue fields of kong/tools/queue_schema.lua), so Kong files load unchanged. One
 * difference: without `ingest_endpoint` the events go into this gateway's own metering store.
 */
import { QUEUE_SCHEMA, queueSettingsProblems, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

export const CONSUMER_FIELDS = ['username', 'id', 'custom_id'] as const;

export const configSchema = {
  type: 'record',
  fields: {
    api_token: { type: 'string', len_min: 1 },
    ingest_endpoint: { type: 'string', len_min: 1, custom: endpointProblem },
    meter_api_requests: { type: 'boolean', default: true },
    meter_ai_token_usage: { type: 'boolean', default: true },
    /** Also meter requests the gateway answered itself (a plugin's refusal, an upstream it could not reach). */
    meter_gateway_answers: { type: 'boolean', default: false },
    subject: {
      type: 'record',
      fields: {
        look_up_value_in: { type: 'string', default: 'consumer', one_of: ['application', 'consumer', 'header', 'query'] },
        field: { type: 'string', len_min: 1, len_max: 256 },
      },
    },
    attributes: {
      type: 'array',
      default: [],
      elements: {
        type: 'record',
        fields: {
          source: { type: 'string', required: true, one_of: ['header', 'query'] },
          /** The header or query parameter to read. */
          look_up_value_in: { type: 'string', required: true, len_min: 1, len_max: 256 },
          /** Where the value goes in the event's `data`. */
          event_property_name: { type: 'string', required: true, len_min: 1, len_max: 63 },
        },
      },
    },
    /** Milliseconds a POST to the ingest endpoint may take. */
    timeout: { type: 'number', default: 10_000, between: [1, 3_600_000] },
    /** Milliseconds an idle connection to the ingest endpoint is kept. */
    keepalive: { type: 'number', default: 60_000, between: [0, 3_600_000] },
    ssl_verify: { type: 'boolean', default: true },
    queue: QUEUE_SCHEMA,
  },
} as const satisfies RecordSchema;

export type RequestMeteringConfig = Infer<typeof configSchema>;
export type QueueConfig = RequestMeteringConfig['queue'];
export type Attribute = RequestMeteringConfig['attributes'][number];

function endpointProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an absolute http or https URL';
  if (url.username || url.password) return 'must not carry credentials: put the token in api_token';
  return undefined;
}

export function checkConfig(config: RequestMeteringConfig): Issue[] {
  const issues: Issue[] = [];
  if (config.ingest_endpoint && !config.api_token) {
    issues.push({ path: ['api_token'], message: 'required with ingest_endpoint (the bearer token the endpoint accepts)' });
  }
  if (config.api_token && !config.ingest_endpoint) {
    issues.push({ path: ['api_token'], message: "only used with ingest_endpoint; without one the events go into this gateway's metering store, which needs no token" });
  }
  const { look_up_value_in: source, field } = config.subject;
  if ((source === 'header' || source === 'query') && !field) {
    issues.push({ path: ['subject', 'field'], message: `the ${source === 'header' ? 'header' : 'query parameter'} holding the subject is required` });
  }
  if (source === 'consumer' && field && !(CONSUMER_FIELDS as readonly string[]).includes(field)) {
    issues.push({ path: ['subject', 'field'], message: `expected one of: ${CONSUMER_FIELDS.join(', ')}` });
  }
  return [...issues, ...queueSettingsProblems(config.queue)];
}
