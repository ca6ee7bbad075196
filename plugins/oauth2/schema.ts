/** The plugin's `config` schema (Kong's kong/plugins/oauth2/schema.lua, same defaults and messages). */
import { headerValueProblem, randomAlphanumeric, type Infer, type Issue, type RecordSchema } from '../../src/pdk/index.ts';

/**
 * Provision keys the schema generated (the operator gave none). `configure` swaps each for a key
 * derived from a persisted secret and the plugin id, so it stays the same across restarts.
 */
export const generatedProvisionKeys = new Set<string>();

function generateProvisionKey(): string {
  const key = randomAlphanumeric(32);
  generatedProvisionKeys.add(key);
  return key;
}

/**
 * RFC 6749 §3.3 `scope-token` (visible ASCII but `"` and `\`), less `,`: a token's scopes go upstream
 * comma-joined in X-Authenticated-Scope, where `a,b` would read as two scopes.
 */
const SCOPE_TOKEN = /^[\x21\x23-\x2b\x2d-\x5b\x5d-\x7e]+$/;

export function scopeTokenProblem(scope: string): string | undefined {
  return SCOPE_TOKEN.test(scope) ? undefined : `invalid scope '${scope}': visible ASCII characters only, except '"', '\\' and ','`;
}

/** RFC 9110 §5.6.2 `token`: what a header name may be made of. */
function headerNameProblem(name: string): string | undefined {
  return /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) ? undefined : `invalid header name '${name}'`;
}

const GRANT_SWITCHES = ['enable_authorization_code', 'enable_implicit_grant', 'enable_client_credentials', 'enable_password_grant'];

function atLeastOneGrantEnabled(config: Record<string, any>): Issue[] {
  if (GRANT_SWITCHES.some((field) => config[field] === true)) return [];
  return [{ path: [], message: `at least one of these fields must be true: ${GRANT_SWITCHES.join(', ')}` }];
}

function mandatoryScopeNeedsScopes(config: Record<string, any>): Issue[] {
  if (config.mandatory_scope === true && (config.scopes === undefined || config.scopes === null)) {
    return [{ path: ['scopes'], message: 'required field missing' }];
  }
  return [];
}

export const configSchema = {
  type: 'record',
  fields: {
    scopes: { type: 'array', elements: { type: 'string', custom: scopeTokenProblem } },
    mandatory_scope: { type: 'boolean', default: false, required: true },
    provision_key: { type: 'string', default: generateProvisionKey, required: true, len_min: 1 },
    token_expiration: { type: 'number', default: 7200, required: true, between: [0, 100_000_000] },
    enable_authorization_code: { type: 'boolean', default: false, required: true },
    enable_implicit_grant: { type: 'boolean', default: false, required: true },
    enable_client_credentials: { type: 'boolean', default: false, required: true },
    enable_password_grant: { type: 'boolean', default: false, required: true },
    hide_credentials: { type: 'boolean', default: false, required: true },
    accept_http_if_already_terminated: { type: 'boolean', default: false, required: true },
    anonymous: { type: 'string', len_min: 1 },
    global_credentials: { type: 'boolean', default: false, required: true },
    // Required (unlike Kong's) so an explicit null is refused: every request reads this header.
    auth_header_name: { type: 'string', default: 'authorization', required: true, len_min: 1, custom: headerNameProblem },
    refresh_token_ttl: { type: 'number', default: 1_209_600, required: true, between: [0, 100_000_000] },
    reuse_refresh_token: { type: 'boolean', default: false, required: true },
    pkce: { type: 'string', default: 'lax', one_of: ['none', 'lax', 'strict'] },
    // Sent in WWW-Authenticate.
    realm: { type: 'string', custom: headerValueProblem },
  },
  entity_checks: [atLeastOneGrantEnabled, mandatoryScopeNeedsScopes],
} as const satisfies RecordSchema;

export type OAuth2Config = Infer<typeof configSchema>;
