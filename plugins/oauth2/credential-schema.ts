/**
 * The `oauth2_credentials` entity (Kong's admin API name `oauth2`): its schema, shared by gateway.yaml
 * and the admin API, and the `hash_secret` transformation.
 */
import { hashDeclaredSecret, headerValueProblem, isHashedSecret, randomAlphanumeric, type ConsumerChild, type EntityDefinition, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const CREDENTIALS_ENTITY = 'oauth2_credentials';

/** Kong validates each redirect URI with LuaSocket's parser: a scheme and a host, and no fragment. */
function checkRedirectUri(uri: string): string | undefined {
  if (uri.includes('#')) return `fragment not allowed in '${uri}'`;
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    return `cannot parse '${uri}'`;
  }
  if (!parsed.protocol || !parsed.hostname) return `cannot parse '${uri}'`;
  return undefined;
}

/** The fields an operator gives; the loader adds `id` and the `consumer` reference. */
export const credentialSchema = {
  type: 'record',
  fields: {
    created_at: { type: 'integer' },
    name: { type: 'string', required: true, len_min: 1 },
    // Sent upstream as X-Credential-Identifier.
    client_id: { type: 'string', len_min: 1, default: () => randomAlphanumeric(32), custom: headerValueProblem },
    /** Stored, plain text, or a PBKDF2 PHC string when `hash_secret`. */
    client_secret: { type: 'string', len_min: 1, default: () => randomAlphanumeric(32) },
    hash_secret: { type: 'boolean', required: true, default: false },
    redirect_uris: { type: 'array', elements: { type: 'string', custom: checkRedirectUri } },
    tags: { type: 'set', elements: { type: 'string' } },
    client_type: { type: 'string', required: true, default: 'confidential', one_of: ['confidential', 'public'] },
  },
} as const satisfies RecordSchema;

export type OAuth2Credential = ConsumerChild<Infer<typeof credentialSchema>>;

/**
 * Kong's transformation: with `hash_secret`, the stored secret is its PBKDF2 hash (kept when already one).
 * Declared credentials are hashed by every process of the node as it loads gateway.yaml, each to the
 * same hash (see hashDeclaredSecret).
 */
export function applySecretHashing<T extends Record<string, any>>(credential: T): T {
  if (!credential.hash_secret || typeof credential.client_secret !== 'string') return credential;
  if (isHashedSecret(credential.client_secret)) return credential;
  return { ...credential, client_secret: hashDeclaredSecret(credential.client_secret, String(credential.client_id)) };
}

export const credentialEntity: EntityDefinition = {
  name: CREDENTIALS_ENTITY,
  schema: credentialSchema,
  parent: { entity: 'consumers', field: 'consumer', required: true },
  endpointKey: 'client_id',
  // Kong's transformation reads both: a lone secret or a lone flag cannot say how to store it.
  allOrNone: ['hash_secret', 'client_secret'],
  // An authorization page asks which application and which developer a client_id is.
  admin: { name: 'oauth2', expandParentOnLookup: true },
  keptByCore: true,
  // Where runtime credentials have always been kept in the plugin's store.
  keyPrefix: 'cred:',
  transform: applySecretHashing,
};
