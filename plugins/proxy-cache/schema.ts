/** Kong's proxy-cache config (kong/plugins/proxy-cache/schema.lua): fields, defaults and messages. */
import type { Infer, RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    response_code: { type: 'array', elements: { type: 'integer', between: [100, 900], required: true }, len_min: 1, required: true, default: [200, 301, 404] },
    request_method: { type: 'array', elements: { type: 'string', one_of: ['HEAD', 'GET', 'POST', 'PATCH', 'PUT'], required: true }, required: true, default: ['GET', 'HEAD'] },
    content_type: { type: 'array', elements: { type: 'string', required: true }, required: true, default: ['text/plain', 'application/json'] },
    cache_ttl: { type: 'integer', gt: 0, required: true, default: 300 },
    strategy: { type: 'string', one_of: ['memory'], required: true },
    cache_control: { type: 'boolean', required: true, default: false },
    ignore_uri_case: { type: 'boolean', required: true, default: false },
    storage_ttl: { type: 'integer' },
    // Kong names an nginx shared dictionary here; Tollgate keeps one bounded cache per name.
    memory: { type: 'record', required: true, fields: { dictionary_name: { type: 'string', required: true, default: 'kong_db_cache' } } },
    vary_query_params: { type: 'array', elements: { type: 'string', required: true } },
    vary_headers: { type: 'array', elements: { type: 'string', required: true } },
    response_headers: {
      type: 'record',
      required: true,
      fields: {
        age: { type: 'boolean', required: true, default: true },
        'X-Cache-Status': { type: 'boolean', required: true, default: true },
        'X-Cache-Key': { type: 'boolean', required: true, default: true },
      },
    },
  },
} as const satisfies RecordSchema;

export type ProxyCacheConfig = Infer<typeof configSchema>;
