/** The plugin's `config` schema, its scope check, and the `meters` entity of gateway.yaml. */
import type { EntityDefinition, Infer, Issue, PluginScope, RecordSchema } from '../../src/pdk/index.ts';
import { collectionPeriodProblem } from './billing/port.ts';
import { collectorProblems } from './ingest/port.ts';
import { AGGREGATIONS, validateMeterCreate } from './meter/port.ts';

const scopeName = { type: 'string' as const, len_min: 1 };

// Every setting with a default is required too, as in Kong's schemas: an explicit null is refused, not run with.
export const configSchema = {
  type: 'record',
  fields: {
    /** Events older than this are purged, and rejected at ingest. */
    retention_days: { type: 'integer', default: 730, required: true, between: [1, 36_500] },
    /** Serve without an authentication plugin on the route (refused by default). */
    allow_unauthenticated: { type: 'boolean', default: false, required: true },
    /** A consumer portal route: it serves only OpenMeter's portal query, authenticated by portal tokens (no authentication plugin). */
    portal: { type: 'boolean', default: false, required: true },
    /** Token scopes required per operation group, when set. */
    scopes: { type: 'record', fields: { ingest: scopeName, manage: scopeName, read: scopeName, billing: scopeName } },
    /** Billing: how long after a period's end its usage is frozen into the issued invoice (ISO 8601). */
    billing: { type: 'record', required: true, fields: { collection_period: { type: 'string', default: 'PT1H', required: true, custom: collectionPeriodProblem } } },
    /** Largest accepted request body, bytes (413 above). */
    max_body_size: { type: 'integer', default: 10 * 1024 * 1024, required: true, between: [1024, 1024 * 1024 * 1024] },
    /** Most events in one ingest request (413 above). */
    max_events_per_request: { type: 'integer', default: 10_000, required: true, between: [1, 1_000_000] },
    /** Events waiting for their commit beyond which producers get 503 + Retry-After. */
    queue_max_events: { type: 'integer', default: 100_000, required: true, between: [1, 10_000_000] },
    /** Most events committed in one LevelDB batch. */
    batch_max_events: { type: 'integer', default: 5_000, required: true, between: [1, 1_000_000] },
    /** How long the first waiting event may wait for others to join its batch, ms. */
    batch_max_wait_ms: { type: 'integer', default: 1, required: true, between: [0, 10_000] },
    /** How long a query may wait for a meter's backfill before answering 503, ms. */
    query_backfill_wait_ms: { type: 'integer', default: 10_000, required: true, between: [0, 600_000] },
    /** The time budget of one evaluation of a collector's mapping, ms. */
    collector_timeout_ms: { type: 'integer', default: 50, required: true, between: [1, 10_000] },
  },
} as const satisfies RecordSchema;

export type MeteringConfig = Infer<typeof configSchema>;

/** Every route the plugin serves must authenticate the caller first (an authentication plugin that runs before it). */
export function checkConfig(config: MeteringConfig, scope: PluginScope): Issue[] {
  if (config.allow_unauthenticated || config.portal) return [];
  const open = scope.runsOn.filter(({ before }) => !before.some((plugin) => plugin.authenticates));
  if (open.length === 0) return [];
  const names = open.map(({ route }) => route.name ?? route.id).join(', ');
  return [
    {
      path: ['allow_unauthenticated'],
      message:
        `metering needs an authentication plugin (e.g. oauth2) on every route it serves; none runs before it on route ${names}; ` +
        'set allow_unauthenticated: true to expose it without one',
    },
  ];
}

const meterSchema: RecordSchema = {
  type: 'record',
  fields: {
    key: { type: 'string', required: true },
    name: { type: 'string' },
    description: { type: 'string' },
    labels: { type: 'map', keys: { type: 'string' }, values: { type: 'string' } },
    event_type: { type: 'string', required: true },
    aggregation: { type: 'string', required: true, one_of: AGGREGATIONS },
    value_property: { type: 'string' },
    dimensions: { type: 'map', keys: { type: 'string' }, values: { type: 'string' } },
    events_from: { type: 'string' },
  },
  entity_checks: [
    (meter) =>
      validateMeterCreate(meter, { nameDefaultsToKey: true, sealed: false }).map((p) => ({
        path: p.field ? p.field.split('.') : [],
        message: p.reason,
      })),
  ],
};

export const meterEntity: EntityDefinition = {
  name: 'meters',
  schema: meterSchema,
  endpointKey: 'key',
};

const collectorSchema: RecordSchema = {
  type: 'record',
  fields: {
    name: { type: 'string', required: true },
    description: { type: 'string' },
    mapping: { type: 'string', required: true },
    match: { type: 'record', fields: { type: { type: 'string' }, source: { type: 'string' } } },
  },
  entity_checks: [
    (collector) =>
      collectorProblems(Object.fromEntries(Object.entries(collector).filter(([, v]) => v !== undefined))).map((p) => ({
        path: p.field ? p.field.split('.') : [],
        message: p.reason,
      })),
  ],
};

/** `collectors:` of gateway.yaml: compiled when the file loads, so a syntax error is a config error with its position. */
export const collectorEntity: EntityDefinition = {
  name: 'collectors',
  schema: collectorSchema,
  endpointKey: 'name',
};
