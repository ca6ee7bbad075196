/** Kong's response-transformer config (kong/plugins/response-transformer/schema.lua). */
import { headerNameProblem, type FieldSchema, type RecordSchema } from '../../src/pdk/index.ts';

export type JsonType = 'boolean' | 'number' | 'string';

interface Typed {
  json: string[];
  json_types: JsonType[];
  headers: string[];
}

export interface ResponseTransformerConfig {
  remove: { json: string[]; headers: string[] };
  rename: { json: string[]; headers: string[] };
  replace: Typed;
  add: Typed;
  append: Typed;
}

/** Kong's `name:value` split: the name runs to the first colon, the value starts after the colons that follow. */
export function splitPair(pair: string): [name: string, value: string | undefined] {
  const m = /^([^:]+):*(.*)$/s.exec(pair);
  return m ? [m[1], m[2] === '' ? undefined : m[2]] : [pair, undefined];
}

const list = (elements: FieldSchema): FieldSchema => ({ type: 'array', default: [], required: true, elements });
const strings = list({ type: 'string' });
const pairs = list({ type: 'string', match: /^[^:]+:.*$/s, match_message: 'invalid value' });
const renamedHeaders = list({
  type: 'string',
  match: /^[^:]+:.*$/s,
  match_message: 'invalid value',
  custom: (p) => splitPair(p).map((name) => name !== undefined && headerNameProblem(name) && `'${name}' is not a valid header`).find(Boolean) || undefined,
});
const typed: RecordSchema = {
  type: 'record',
  fields: { json: pairs, json_types: list({ type: 'string', one_of: ['boolean', 'number', 'string'] }), headers: pairs },
};

export const configSchema: RecordSchema = {
  type: 'record',
  fields: {
    remove: { type: 'record', fields: { json: strings, headers: strings } },
    rename: { type: 'record', fields: { json: pairs, headers: renamedHeaders } },
    replace: typed,
    add: typed,
    append: typed,
  },
};
