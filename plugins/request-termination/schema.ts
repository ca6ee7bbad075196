/** Kong's request-termination config (kong/plugins/request-termination/schema.lua): fields, defaults, checks. */
import { HEADER_NAME, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

export interface RequestTerminationConfig {
  status_code: number;
  message?: string;
  content_type?: string;
  body?: string;
  echo: boolean;
  trigger?: string;
}

const present = (v: unknown): boolean => typeof v === 'string' && v.length > 0;

export const configSchema: RecordSchema = {
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
};

/** Kong's custom_validator, with its messages. */
function checkCombinations(c: Record<string, any>): Issue[] {
  const fail = (message: string): Issue[] => [{ path: [], message }];
  if (present(c.message) && (present(c.content_type) || present(c.body))) return fail('message cannot be used with content_type or body');
  if (present(c.content_type) && !present(c.body)) return fail('content_type requires a body');
  if (c.echo && (present(c.content_type) || present(c.body))) return fail('echo cannot be used with content_type and body');
  return [];
}
