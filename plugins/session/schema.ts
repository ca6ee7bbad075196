/**
 * Kong's session config (kong/plugins/session/schema.lua, lua-resty-session 4's settings): the secret the
 * cookie's key is derived from, where the session lives, its timeouts, the cookie's attributes, the
 * persistent ("remember") cookie, the headers that describe it, and how a client logs out.
 */
import { headerValueProblem, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

const SESSION_HEADERS = ['id', 'audience', 'subject', 'timeout', 'idling-timeout', 'rolling-timeout', 'absolute-timeout'] as const;
const headerSet = { type: 'set', elements: { type: 'string', one_of: SESSION_HEADERS } } as const;
/** Seconds; 0 turns the timeout off, as in lua-resty-session. */
const seconds = (byDefault: number) => ({ type: 'number', default: byDefault, between: [0, 1_000_000_000] }) as const;
/** A cookie name: an RFC 6265 token. */
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const cookieName = (byDefault: string) => ({ type: 'string', default: byDefault, match: COOKIE_NAME, match_message: 'invalid cookie name' }) as const;

export const configSchema = {
  type: 'record',
  fields: {
    /**
     * What the cookie's encryption keys are derived from. Kong's default is random when the plugin is created;
     * here, when absent, a random secret generated once and kept in the store, so every process and node shares it.
     */
    secret: { type: 'string', len_min: 1, referenceable: true },
    /** `cookie`: the session data, encrypted, is the cookie; `kong`: the cookie holds an id, the data is in the store. */
    storage: { type: 'string', default: 'cookie', one_of: ['cookie', 'kong'] },
    audience: { type: 'string', default: 'default', len_min: 1 },
    idling_timeout: seconds(900),
    rolling_timeout: seconds(3600),
    absolute_timeout: seconds(86400),
    stale_ttl: seconds(10),
    cookie_name: cookieName('session'),
    cookie_path: { type: 'string', default: '/', custom: headerValueProblem },
    cookie_domain: { type: 'string', custom: headerValueProblem },
    cookie_same_site: { type: 'string', default: 'Strict', one_of: ['Strict', 'Lax', 'None', 'Default'] },
    cookie_http_only: { type: 'boolean', default: true },
    cookie_secure: { type: 'boolean', default: true },
    remember: { type: 'boolean', default: false },
    remember_cookie_name: cookieName('remember'),
    remember_rolling_timeout: seconds(604800),
    remember_absolute_timeout: seconds(2592000),
    response_headers: headerSet,
    request_headers: headerSet,
    read_body_for_logout: { type: 'boolean', default: false },
    logout_methods: { type: 'set', elements: { type: 'string', one_of: ['GET', 'POST', 'DELETE'] }, default: ['POST', 'DELETE'] },
    logout_query_arg: { type: 'string', default: 'session_logout' },
    logout_post_arg: { type: 'string', default: 'session_logout' },
    hash_subject: { type: 'boolean', default: false },
    store_metadata: { type: 'boolean', default: false },
  },
} as const satisfies RecordSchema;

export type SessionConfig = Infer<typeof configSchema>;
export type SessionHeader = (typeof SESSION_HEADERS)[number];
