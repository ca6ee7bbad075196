/** The plugin's runtime: one per gateway process, holding the credential directory and token store. */
import { createHmac, randomBytes } from 'node:crypto';
import { alphanumericFrom, putIfAbsent, type AccessContext, type PluginApi, type PluginRuntime, type Store } from '../../src/pdk/index.ts';
import { adminRoutes } from './api.ts';
import { authorizeEndpoint } from './authorize.ts';
import { CREDENTIALS_ENTITY, type OAuth2Credential } from './credential-schema.ts';
import { CredentialDirectory } from './credentials.ts';
import { introspectionEndpoint, revocationEndpoint } from './introspection.ts';
import { issuerOf, issuerPath, MetadataDirectory, metadataDocument, OIDC_WELL_KNOWN, WELL_KNOWN } from './metadata.ts';
import { protect, type ProtectDeps } from './protect.ts';
import { answeringLimits } from './responses.ts';
import { generatedProvisionKeys, type OAuth2Config } from './schema.ts';
import { tokenEndpoint } from './token-endpoint.ts';
import { TokenStore } from './tokens.ts';

const ENDPOINT_MARKER = '/oauth2/';
const PROVISION_SECRET_KEY = 'meta:provision-secret';

export async function createRuntime(api: PluginApi): Promise<PluginRuntime<OAuth2Config>> {
  const credentials = new CredentialDirectory(api.entities<OAuth2Credential>(CREDENTIALS_ENTITY), api.store, api.consumers);
  const tokens = new TokenStore(api.store);
  // Tokens of a removed credential are refused at once (every check looks the credential up, and the
  // cache forgets them); the process that removed it deletes their rows and codes, and `close` waits for that.
  const cleanups = new Set<Promise<unknown>>();
  credentials.onRemoved((credential, byThisProcess) => {
    tokens.forgetCredential(credential.id);
    if (!byThisProcess) return;
    const cleanup = tokens.revokeCredential(credential.id);
    const tracked = cleanup
      .catch((err) => api.log.error({ err }, 'oauth2: deleting the tokens of a removed credential failed'))
      .finally(() => cleanups.delete(tracked));
    cleanups.add(tracked);
    return cleanup;
  });
  const provisionSecret = await loadProvisionSecret(api.store);
  const metadata = new MetadataDirectory();
  const deps: ProtectDeps = { credentials, tokens, consumers: api.consumers };

  return {
    configure(view) {
      for (const instance of view.instances) {
        if (generatedProvisionKeys.delete(instance.config.provision_key)) {
          instance.config.provision_key = deriveProvisionKey(provisionSecret, instance.id);
        }
      }
      metadata.configure(view);
    },
    async access(ctx, config, plugin) {
      const endpoint = endpointOf(ctx.path);
      if (endpoint === 'token') return answeringLimits(ctx, () => tokenEndpoint(ctx, config, plugin, deps));
      if (endpoint === 'authorize') return answeringLimits(ctx, () => authorizeEndpoint(ctx, config, plugin, deps));
      if (endpoint === 'introspect') return answeringLimits(ctx, () => introspectionEndpoint(ctx, config, deps));
      if (endpoint === 'revoke') return answeringLimits(ctx, () => revocationEndpoint(ctx, config, deps));
      if (isWellKnownRequest(ctx, WELL_KNOWN)) return answerMetadata(ctx, config);
      if (isWellKnownRequest(ctx, OIDC_WELL_KNOWN)) return answerNoOpenIdConfiguration(ctx);
      return protect(ctx, config, deps);
    },
    unmatched: (req) => metadata.answer(req),
    adminRoutes: adminRoutes({ credentials, tokens, consumers: api.consumers }),
    // `hash_secret`: the secret a write sets is stored as its PBKDF2 hash, derived on the worker pool.
    beforeEntitySave: { [CREDENTIALS_ENTITY]: (credential) => credentials.withHashedSecret(credential) },
    async close() {
      await Promise.allSettled([...cleanups]);
      tokens.close();
      await credentials.close();
    },
  };
}

/** Kong matches the end of the path: `<anything>/oauth2/token[/]`. */
function endpointOf(path: string): 'token' | 'authorize' | 'introspect' | 'revoke' | undefined {
  const at = path.lastIndexOf(ENDPOINT_MARKER);
  if (at < 0) return undefined;
  const name = path.slice(at + ENDPOINT_MARKER.length).replace(/\/$/, '');
  return name === 'token' || name === 'authorize' || name === 'introspect' || name === 'revoke' ? name : undefined;
}

/** A GET of a metadata document at the issuer's path: answered here, never behind the bearer check. */
function isWellKnownRequest(ctx: AccessContext, document: string): boolean {
  return (ctx.method === 'GET' || ctx.method === 'HEAD') && ctx.path === issuerPath(ctx.matchedPrefix) + document;
}

function answerMetadata(ctx: AccessContext, config: OAuth2Config): void {
  ctx.respond(200, metadataDocument(issuerOf(ctx.rawHost, issuerPath(ctx.matchedPrefix)), config));
}

/**
 * OIDC clients ask for `openid-configuration` first and turn to RFC 8414 metadata when it is not found;
 * the bearer check's 401 ("The access token is missing") would end their discovery instead.
 */
function answerNoOpenIdConfiguration(ctx: AccessContext): void {
  const metadata = issuerOf(ctx.rawHost, issuerPath(ctx.matchedPrefix)) + WELL_KNOWN;
  ctx.error(404, `Not found: no OpenID Connect discovery here; the OAuth 2.0 authorization server metadata (RFC 8414) is at ${metadata}`);
}

/**
 * A random secret kept in the store: provision keys derived from it survive restarts and are the same on
 * every node. Nodes starting together on an empty store each propose one; the first written is everyone's.
 */
async function loadProvisionSecret(store: Store): Promise<string> {
  const existing = await store.get(PROVISION_SECRET_KEY);
  if (existing) return existing;
  const proposed = randomBytes(32).toString('base64url');
  if (await putIfAbsent(store, PROVISION_SECRET_KEY, proposed)) return proposed;
  return (await store.get(PROVISION_SECRET_KEY))!;
}

/** 32 alphanumerics from HMAC-SHA512(secret, plugin id): stable per plugin, unguessable without the secret. */
function deriveProvisionKey(secret: string, pluginId: string): string {
  return alphanumericFrom(createHmac('sha512', secret).update(pluginId).digest(), 32);
}
