/**
 * Kong's basic-auth (kong/plugins/basic-auth/schema.lua, daos.lua, crypto.lua): the plugin's config, and
 * the `basicauth_credentials` entity. Passwords are never kept as given: those of gateway.yaml are
 * transformed as Kong imports them (its SHA-1 hash salted with the consumer id, so a Kong export's
 * hashes work as they are), those created through the admin API are stored as PBKDF2 hashes.
 */
import { createHash } from 'node:crypto';
import { headerValueProblem, type ConsumerChild, type EntityDefinition, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

export const configSchema = {
  type: 'record',
  fields: {
    anonymous: { type: 'string', len_min: 1 },
    hide_credentials: { type: 'boolean', required: true, default: false },
    // Sent in WWW-Authenticate.
    realm: { type: 'string', required: true, default: 'service', custom: headerValueProblem },
  },
} as const satisfies RecordSchema;

export type BasicAuthConfig = Infer<typeof configSchema>;


/** Kong's crypto.hash: SHA-1 of the password followed by the consumer id, in hex. */
export function kongPasswordHash(consumerId: string, password: string | null | undefined): string {
  return createHash('sha1')
    .update((password ?? '') + consumerId)
    .digest('hex');
}

export const KONG_PASSWORD_HASH = /^[0-9a-f]{40}$/;

const credentialSchema = {
  type: 'record',
  fields: {
    // Sent upstream as X-Credential-Identifier.
    username: { type: 'string', required: true, len_min: 1, custom: headerValueProblem },
    /** Stored, a PBKDF2 PHC string, or Kong's 40 hex digits of SHA-1(password + consumer id). */
    password: { type: 'string', required: true },
    tags: { type: 'set', elements: { type: 'string', len_min: 1 } },
  },
} as const satisfies RecordSchema;

export type BasicCredential = ConsumerChild<Infer<typeof credentialSchema>>;

export const credentialEntity: EntityDefinition = {
  name: 'basicauth_credentials',
  schema: credentialSchema,
  parent: { entity: 'consumers', field: 'consumer', required: true },
  endpointKey: 'username',
  admin: { name: 'basic-auths', nested: 'basic-auth' },
  keptByCore: true,
  transform: (credential) => ({ ...credential, password: kongPasswordHash(credential.consumer.id, credential.password) }),
};
