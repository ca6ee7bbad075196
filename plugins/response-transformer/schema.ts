/** Kong's response-transformer config (kong/plugins/response-transformer/schema.lua). */
import { headerNameProblem, type FieldSchema, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

/** Kong's `name:value` split: the name runs to the first colon, the value starts after the colons that follow. */
export function splitPair(pair: string): [name: string, value: string | undefined] {
  const m = /^([^:]+):*(.*)$/s.exec(pair);
  return m ? [m[1], m[2] === '' ? undefined : m[2]] : [pair, undefined];
}

const list = <const E extends FieldSchema>(elements: E) => ({ type: 'array', default: [], required: true, elements }) as const;
const strings = list({ type: 'string' });
const pairs = list({ type: 'string', match: /^[^:]+:.*$/s, match_message: 'invalid value' });
const renamedHeaders = list({
  type: 'string',
  match: /^[^:]+:.*$/s,
  match_message: 'invalid value',
  custom: (p) => splitPair(p).map((name) => name !== undefined && headerNameProblem(name) && `'${name}' is not a valid header`).find(Boolean) || undefined,
});
const typed = {
  type: 'record',
  fields: { json: pairs, json_types: list({ type: 'string', one_of: ['boolean', 'number', 'string'] }), headers: pairs },
} as const satisfies RecordSchema;

export const configSchema = {
  type: 'record',
  fields: {
    remove: { type: 'record', fields: { json: strings, headers: strings } },
    rename: { type: 'record', fields: { json: pairs, headers: renamedHeaders } },
    replace: typed,
    add: typed,
    append: typed,
  },
} as const satisfies RecordSchema;

export type ResponseTransformerConfig = Infer<typeof configSchema>;
export type JsonType = ResponseTransformerConfig['add']['json_types'][number];
