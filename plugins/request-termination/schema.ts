/** Kong's request-termination config (kong/plugins/request-termination/schema.lua): fields, defaults, checks. */
import { HEADER_NAME, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

const present = (v: unknown): boolean => typeof v === 'string' && v.length > 0;

export const configSchema = {
  type: 'record',
  fields: {
    status_code: { type: 'integer', required: true, default: 503, between: [100, 599] },
    message: { type: 'string' },
    content_type: { type: 'string' },
    body: { type: 'string' },
    echo: { type: 'boolean', required: true, default: false },
    trigger: HEADER_NAME,
  },
  entity_checks: [checkCombinations],
} as const satisfies RecordSchema;

export type RequestTerminationConfig = Infer<typeof configSchema>;

/** Kong's custom_validator, with its messages. */
function checkCombinations(c: Record<string, any>): Issue[] {
  const fail = (message: string): Issue[] => [{ path: [], message }];
  if (present(c.message) && (present(c.content_type) || present(c.body))) return fail('message cannot be used with content_type or body');
  if (present(c.content_type) && !present(c.body)) return fail('content_type requires a body');
  if (c.echo && (present(c.content_type) || present(c.body))) return fail('echo cannot be used with content_type and body');
  return [];
}
