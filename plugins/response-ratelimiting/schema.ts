/** Kong's response-ratelimiting config (kong/plugins/response-ratelimiting/schema.lua): fields, defaults, checks, messages. */
import { atLeastOneOf, HEADER_NAME, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';
import { periodOrderProblem, PERIODS, redisSchema, redisShorthands } from '../rate-limiting/public.ts';

const limit = { type: 'number', gt: 0 } as const;

/** The limits of one usage name (`video`), per period. */
const usageLimits = {
  type: 'record',
  required: true,
  fields: { second: limit, minute: limit, hour: limit, day: limit, month: limit, year: limit },
  entity_checks: [atLeastOneOf([...PERIODS])],
} as const satisfies RecordSchema;

export const configSchema = {
  type: 'record',
  fields: {
    header_name: { ...HEADER_NAME, required: true, default: 'x-kong-limit' },
    limit_by: { type: 'string', required: true, default: 'consumer', one_of: ['consumer', 'credential', 'ip'] },
    policy: { type: 'string', required: true, default: 'local', one_of: ['local', 'cluster', 'redis'] },
    fault_tolerant: { type: 'boolean', required: true, default: true },
    redis: redisSchema,
    block_on_first_violation: { type: 'boolean', required: true, default: false },
    hide_client_headers: { type: 'boolean', required: true, default: false },
    // A usage's name is part of header names (X-RateLimit-Remaining-<name>): it must be fit for one.
    limits: { type: 'map', required: true, keys: HEADER_NAME, values: usageLimits },
    ...redisShorthands,
  },
  entity_checks: [checkLimits],
} as const satisfies RecordSchema;

export type ResponseRateLimitingConfig = Infer<typeof configSchema>;

/** Kong's `len_min = 1` on the map and its values' validate_periods_order, both reported at `limits`. */
function checkLimits(c: Record<string, any>): Issue[] {
  const limits = Object.values(c.limits as Record<string, Record<string, unknown>>);
  if (limits.length === 0) return [{ path: ['limits'], message: 'length must be at least 1' }];
  const misordered = limits.map(periodOrderProblem).find((problem) => problem !== undefined);
  return misordered ? [{ path: ['limits'], message: misordered }] : [];
}
