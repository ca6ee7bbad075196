/** Kong's cors config (kong/plugins/cors/schema.lua): fields, defaults and the origin check. */
import { operatorRegexProblem, type Infer, type OperatorRegexOptions, type RecordSchema } from '../../src/pdk/index.ts';

export const METHODS = ['GET', 'HEAD', 'PUT', 'PATCH', 'POST', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'] as const;

/** Origin regexes are matched whole (Kong anchors them at both ends), case-sensitively, in linear time (RE2). */
export const ORIGIN_REGEX: OperatorRegexOptions = { anchored: true, ignoreCase: false };

/** `*`, or a regex (a plain origin is a regex that matches itself) the linear-time engine runs. */
function originProblem(origin: string): string | undefined {
  if (origin === '*') return undefined;
  const problem = operatorRegexProblem(origin, ORIGIN_REGEX);
  return problem === undefined ? undefined : `'${origin}' is not a valid regex (${problem})`;
}

export const configSchema = {
  type: 'record',
  fields: {
    origins: { type: 'array', elements: { type: 'string', custom: originProblem } },
    headers: { type: 'array', elements: { type: 'string' } },
    exposed_headers: { type: 'array', elements: { type: 'string' } },
    methods: { type: 'array', default: [...METHODS], elements: { type: 'string', one_of: METHODS } },
    max_age: { type: 'number' },
    credentials: { type: 'boolean', required: true, default: false },
    private_network: { type: 'boolean', required: true, default: false },
    preflight_continue: { type: 'boolean', required: true, default: false },
    allow_origin_absent: { type: 'boolean', required: true, default: true },
  },
} as const satisfies RecordSchema;

export type CorsConfig = Infer<typeof configSchema>;
