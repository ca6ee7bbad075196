/**
 * Kong's http-log config (kong/plugins/http-log/schema.lua): fields, defaults, the header names it
 * refuses and its custom validator, with Kong 3.x's legacy queue fields still accepted. Lua is not run
 * here: `custom_fields_by_lua` is refused with a line saying so.
 */
import { HEADER_NAME, LUA_FIELD, QUEUE_SCHEMA, queueSettingsProblems, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

/** Headers the plugin sets itself (Kong's match_none on the header names), with Kong's messages. */
const OWN_HEADERS: Record<string, string> = {
  host: "cannot contain 'Host' header",
  'content-length': "cannot contain 'Content-Length' header",
  'content-type': "cannot contain 'Content-Type' header",
};

export const configSchema = {
  type: 'record',
  fields: {
    http_endpoint: { type: 'string', required: true, custom: urlProblem },
    method: { type: 'string', default: 'POST', one_of: ['POST', 'PUT', 'PATCH'] },
    content_type: { type: 'string', default: 'application/json', one_of: ['application/json', 'application/json; charset=utf-8'] },
    /** Milliseconds one send may take. */
    timeout: { type: 'number', default: 10_000, between: [1, 3_600_000] },
    /** Milliseconds an idle connection to the endpoint is kept. */
    keepalive: { type: 'number', default: 60_000, between: [0, 3_600_000] },
    // Kong 3.x's legacy queue fields, deprecated for `queue` (applied as Kong's Queue.get_plugin_params does).
    retry_count: { type: 'integer' },
    queue_size: { type: 'integer', between: [1, 1_000_000] },
    flush_timeout: { type: 'number', between: [0, 3600] },
    headers: {
      type: 'map',
      keys: { ...HEADER_NAME, custom: (name: string) => HEADER_NAME.custom(name) ?? OWN_HEADERS[name.toLowerCase()] },
      values: { type: 'string', len_min: 1 },
    },
    queue: QUEUE_SCHEMA,
    custom_fields_by_lua: LUA_FIELD,
  },
  entity_checks: [checkAuthorization],
} as const satisfies RecordSchema;

export type HttpLogConfig = Infer<typeof configSchema>;

/** Kong's typedefs.url: an absolute URL; here only http and https, which are what a log server speaks. */
function urlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return /^[a-z][a-z0-9+.-]*:/i.test(value) ? 'missing host in url' : 'missing scheme in url';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'expected an http or https url';
  return url.hostname ? undefined : 'missing host in url';
}

/** Kong's custom_validator: credentials come from the URL's userinfo or from a header, not both. */
function checkAuthorization(config: Record<string, any>): Issue[] {
  const url = URL.canParse(config.http_endpoint) ? new URL(config.http_endpoint) : undefined;
  const hasUserinfo = Boolean(url && (url.username || url.password));
  if (hasUserinfo && Object.keys(config.headers ?? {}).some((name) => name.toLowerCase() === 'authorization')) {
    return [{ path: [], message: "specifying both an 'Authorization' header and user info in 'http_endpoint' is not allowed" }];
  }
  return config.queue ? queueSettingsProblems(config.queue) : [];
}
