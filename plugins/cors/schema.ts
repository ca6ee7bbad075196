/** Kong's cors config (kong/plugins/cors/schema.lua): fields, defaults and the origin check. */
import { compileRouteRegex, type RecordSchema } from '../../src/pipeline/plugin-api.ts';

export const METHODS = ['GET', 'HEAD', 'PUT', 'PATCH', 'POST', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'] as const;

export interface CorsConfig {
  origins?: string[] | null;
  headers?: string[] | null;
  exposed_headers?: string[] | null;
  methods?: string[] | null;
  max_age?: number | null;
  credentials: boolean;
  private_network: boolean;
  preflight_continue: boolean;
  allow_origin_absent: boolean;
}

/** `*`, or a regex (a plain origin is a regex that matches itself); JS syntax, refused when it could backtrack without bound. */
function originProblem(origin: string): string | undefined {
  if (origin === '*') return undefined;
  return typeof compileRouteRegex(origin, { anchored: true, ignoreCase: false }) === 'string' ? `'${origin}' is not a valid regex` : undefined;
}

export const configSchema: RecordSchema = {
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
};
