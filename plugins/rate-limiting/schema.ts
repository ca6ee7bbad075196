/** Kong's rate-limiting config (kong/plugins/rate-limiting/schema.lua): fields, defaults, checks, messages. */
import { HEADER_NAME, PATH, type Infer, type Issue, type PluginScope, type RecordSchema } from '../../src/pdk/index.ts';
import { PERIODS } from './periods.ts';

/** Kong's `sync_rate` value for "count synchronously". */
export const SYNC_RATE_REALTIME = -1;

const limit = { type: 'number', gt: 0 } as const;

/** Kong's shared Redis settings (kong/tools/redis/schema.lua): accepted, so Kong files load. */
export const redisSchema = {
  type: 'record',
  fields: {
    host: { type: 'string' },
    port: { type: 'integer', between: [0, 65535], default: 6379 },
    timeout: { type: 'integer', between: [0, 2 ** 31 - 2], default: 2000 },
    username: { type: 'string', referenceable: true },
    password: { type: 'string', referenceable: true },
    database: { type: 'integer', default: 0 },
    ssl: { type: 'boolean', default: false },
    ssl_verify: { type: 'boolean', default: false },
    server_name: { type: 'string' },
  },
} as const satisfies RecordSchema;

/** Kong's deprecated shorthands of the redis fields (still in many exported files): accepted, unused. */
export const redisShorthands = {
  redis_host: { type: 'string' },
  redis_port: { type: 'integer', between: [0, 65535] },
  redis_password: { type: 'string' },
  redis_username: { type: 'string' },
  redis_ssl: { type: 'boolean' },
  redis_ssl_verify: { type: 'boolean' },
  redis_server_name: { type: 'string' },
  redis_timeout: { type: 'integer' },
  redis_database: { type: 'integer' },
} as const satisfies RecordSchema['fields'];

export const configSchema = {
  type: 'record',
  fields: {
    second: limit,
    minute: limit,
    hour: limit,
    day: limit,
    month: limit,
    year: limit,
    limit_by: { type: 'string', default: 'consumer', one_of: ['consumer', 'credential', 'ip', 'service', 'header', 'path'] },
    header_name: HEADER_NAME,
    path: PATH,
    policy: { type: 'string', default: 'local', one_of: ['local', 'cluster', 'redis'] },
    fault_tolerant: { type: 'boolean', required: true, default: true },
    redis: redisSchema,
    hide_client_headers: { type: 'boolean', required: true, default: false },
    error_code: { type: 'number', default: 429, gt: 0 },
    error_message: { type: 'string', default: 'API rate limit exceeded' },
    sync_rate: { type: 'number', required: true, default: SYNC_RATE_REALTIME },
    ...redisShorthands,
  },
  entity_checks: [checkLimits, checkLimitBy],
} as const satisfies RecordSchema;

export type RateLimitingConfig = Infer<typeof configSchema>;

function checkLimits(c: Record<string, any>): Issue[] {
  if (!PERIODS.some((p) => typeof c[p] === 'number')) {
    return [{ path: [], message: `at least one of these fields must be non-empty: ${PERIODS.map((p) => `'config.${p}'`).join(', ')}` }];
  }
  const misordered = periodOrderProblem(c);
  // Kong's rate-limiting capitalizes the message its response-ratelimiting writes in lower case.
  if (misordered) return [{ path: [], message: misordered[0].toUpperCase() + misordered.slice(1) }];
  if (c.policy !== 'redis' && c.sync_rate !== SYNC_RATE_REALTIME) return [{ path: [], message: 'sync_rate can only be used with the redis policy' }];
  return [];
}

/** Kong's validate_periods_order: a longer period never allows fewer requests than a shorter one. */
export function periodOrderProblem(c: Record<string, any>): string | undefined {
  for (const [i, lower] of PERIODS.entries()) {
    if (typeof c[lower] !== 'number') continue;
    for (const upper of PERIODS.slice(i + 1)) {
      if (typeof c[upper] === 'number' && c[upper] < c[lower]) {
        return `the limit for ${upper}(${c[upper].toFixed(1)}) cannot be lower than the limit for ${lower}(${c[lower].toFixed(1)})`;
      }
    }
  }
  return undefined;
}

function checkLimitBy(c: Record<string, any>): Issue[] {
  if (c.limit_by === 'header' && !c.header_name) return [{ path: ['header_name'], message: 'required field missing' }];
  if (c.limit_by === 'path' && !c.path) return [{ path: ['path'], message: 'required field missing' }];
  return [];
}

/** Checks beyond the schema: what Tollgate cannot do is refused where the file says it (response-ratelimiting's too). */
export function checkConfig(config: Pick<RateLimitingConfig, 'policy'>, _scope: PluginScope): Issue[] {
  if (config.policy !== 'redis') return [];
  return [{ path: ['policy'], message: "the 'redis' policy is not available in Tollgate: use 'local' (counters per node) or 'cluster' (counters in the gateway's shared store)" }];
}
