/** Kong's ip-restriction config (kong/plugins/ip-restriction/schema.lua). */
import { describedAs, IP_OR_CIDR, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

const nonEmpty = (list: unknown): boolean => Array.isArray(list) && list.length > 0;

export const configSchema = {
  type: 'record',
  fields: {
    allow: { type: 'array', elements: IP_OR_CIDR },
    deny: { type: 'array', elements: IP_OR_CIDR },
    // A status Node can send as a final answer (Kong's is any number).
    status: { type: 'integer', between: [200, 599] },
    message: { type: 'string' },
  },
  entity_checks: [
    describedAs([{ at_least_one_of: ['allow', 'deny'] }], (c) =>
      nonEmpty(c.allow) || nonEmpty(c.deny) ? [] : [{ path: [], message: "at least one of these fields must be non-empty: 'config.allow', 'config.deny'" }],
    ),
  ],
} as const satisfies RecordSchema;

export type IpRestrictionConfig = Infer<typeof configSchema>;
