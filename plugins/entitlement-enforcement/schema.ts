/** The plugin's `config` (Kong Gateway 3.16's `entitlement-enforcement` fields that apply to an in-process decision). */
import type { Infer, Issue, RecordSchema } from '../../src/pdk/index.ts';

export const CONSUMER_FIELDS = ['username', 'id', 'custom_id'] as const;

export const configSchema = {
  type: 'record',
  fields: {
    feature: { type: 'record', required: true, fields: { key: { type: 'string', required: true, len_min: 1, len_max: 64 } } },
    /** Where the customer's identifier comes from: the authenticated consumer (default) or a request header. */
    customer: {
      type: 'record',
      fields: {
        look_up_value_in: { type: 'string', default: 'consumer', one_of: ['consumer', 'header'] },
        field: { type: 'string', len_min: 1, len_max: 256 },
      },
    },
    /** Refuse requests whose identifier names no customer (403); otherwise let them through. */
    deny_unknown_customers: { type: 'boolean', default: true },
    /** When no decision can be made (billing not loaded yet, a subscription just started or ended). */
    fail_policy: { type: 'string', default: 'allow', one_of: ['allow', 'deny'] },
  },
} as const satisfies RecordSchema;

export type EnforcementConfig = Infer<typeof configSchema>;

export function checkConfig(config: EnforcementConfig): Issue[] {
  const { look_up_value_in: source, field } = config.customer;
  if (source === 'header' && !field) return [{ path: ['customer', 'field'], message: 'the header to read the customer from is required' }];
  if (source === 'consumer' && field && !(CONSUMER_FIELDS as readonly string[]).includes(field)) {
    return [{ path: ['customer', 'field'], message: `expected one of: ${CONSUMER_FIELDS.join(', ')}` }];
  }
  return [];
}
