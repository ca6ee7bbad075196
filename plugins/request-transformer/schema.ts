/** Kong's request-transformer config (kong/plugins/request-transformer/schema.lua), with its checks. */
import { headerNameProblem, upstreamHeaderNameProblem, type FieldSchema, type Infer, type RecordSchema } from '../../src/pdk/index.ts';
import { Template, TemplateError } from './templates.ts';

/** Kong's `name:value` split: the name runs to the first colon, the value starts after the colons that follow. */
export function splitPair(pair: string): [name: string, value: string] {
  const m = /^([^:]+):*(.*)$/s.exec(pair);
  return m ? [m[1], m[2]] : [pair, ''];
}

function templateProblem(value: string): string | undefined {
  try {
    Template.parse(value);
    return undefined;
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err;
    return `value '${value}' is not in supported format, error: ${err.message}`;
  }
}

/** Kong's check_for_value: a pair with a value that is a valid template. */
function pairProblem(pair: string): string | undefined {
  const [name, value] = splitPair(pair);
  return value === '' ? `key '${name}' has no value` : templateProblem(value);
}

function headerProblem(name: string): string | undefined {
  return headerNameProblem(name) && `'${name}' is not a valid header`;
}

/** A header the plugin sets (replace, add, append, a rename's new name): never one the gateway sets itself. */
function settableHeaderProblem(name: string): string | undefined {
  return headerProblem(name) ?? upstreamHeaderNameProblem(name);
}

const list = <const E extends FieldSchema>(elements: E) => ({ type: 'array', default: [], required: true, elements }) as const;
const strings = list({ type: 'string' });
const headerNames = list({ type: 'string', custom: headerProblem });
const pairs = list({ type: 'string', custom: pairProblem });
const headerPairs = list({ type: 'string', match: /^[^:]+:.*$/s, match_message: 'invalid value', custom: (p) => settableHeaderProblem(splitPair(p)[0]) ?? templateProblem(splitPair(p)[1]) });
const renamedHeaders = list({
  type: 'string', match: /^[^:]+:.*$/s, match_message: 'invalid value',
  custom: (p) => {
    const [from, to] = splitPair(p);
    return headerProblem(from) ?? settableHeaderProblem(to);
  },
});

const record = <const F extends Record<string, FieldSchema>>(fields: F) => ({ type: 'record', fields }) as const;

export const configSchema = {
  type: 'record',
  fields: {
    http_method: { type: 'string', match: /^[A-Z]+$/ },
    remove: record({ body: strings, headers: headerNames, querystring: strings }),
    rename: record({ body: pairs, headers: renamedHeaders, querystring: pairs }),
    replace: record({ body: pairs, headers: headerPairs, querystring: pairs, uri: { type: 'string', custom: templateProblem } }),
    add: record({ body: pairs, headers: headerPairs, querystring: pairs }),
    append: record({ body: pairs, headers: headerPairs, querystring: pairs }),
  },
} as const satisfies RecordSchema;

export type RequestTransformerConfig = Infer<typeof configSchema>;
