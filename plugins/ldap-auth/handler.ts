/**
 * Kong's ldap-auth access (kong/plugins/ldap-auth/access.lua): credentials from `Proxy-Authorization`, then
 * `Authorization`, each checked by a bind as `<attribute>=<username>,<base_dn>`; the verdict is remembered
 * for `cache_ttl`. A caller the directory accepts is no consumer (Kong authenticates the credential alone):
 * the upstream gets `X-Credential-Identifier: <username>` and no consumer headers.
 */
import {
  authenticateWith,
  challenge,
  findHeader,
  type AccessContext,
  type AuthenticationFailure,
  type AuthenticationOutcome,
  type PluginApi,
  type PluginRuntime,
} from '../../src/pdk/index.ts';
import { BindCache, cacheKey } from './bind-cache.ts';
import { credentialsIn, escapeDnValue, schemePrefix, type GivenCredentials } from './credentials.ts';
import { Directories, type DirectoryTarget } from './directory.ts';
import type { LdapAuthConfig } from './schema.ts';

/** What an instance's requests need of its config, made once per configuration. */
export interface PreparedLdap {
  refusal: AuthenticationFailure;
  scheme: RegExp;
  target: DirectoryTarget;
}

export function prepare(config: LdapAuthConfig): PreparedLdap {
  // Kong sends its default scheme in capitals (kong/kong#3656) and any other as configured.
  const scheme = config.header_type === 'ldap' ? 'LDAP' : config.header_type;
  return {
    refusal: { status: 401, message: 'Unauthorized', headers: { 'www-authenticate': challenge(scheme, { realm: config.realm }) } },
    scheme: schemePrefix(config.header_type),
    target: {
      host: config.ldap_host,
      port: config.ldap_port,
      ldaps: config.ldaps,
      startTls: config.start_tls,
      verify: config.verify_ldap_host,
      timeoutMs: config.timeout,
      keepaliveMs: config.keepalive,
    },
  };
}

export function createRuntime(api: PluginApi): PluginRuntime<LdapAuthConfig, PreparedLdap> {
  const directories = new Directories();
  const cache = new BindCache(api);

  /** The credential's key when the directory accepts it, else undefined (a promise when the directory is asked). */
  const check = (config: LdapAuthConfig, prepared: PreparedLdap, given: GivenCredentials): string | undefined | Promise<string | undefined> => {
    const key = cacheKey(config, given.username, given.password);
    const dn = `${config.attribute}=${escapeDnValue(given.username)},${config.base_dn}`;
    const accepted = cache.verdict(key, config.cache_ttl, () => directories.bind(prepared.target, dn, given.password));
    if (typeof accepted === 'boolean') return accepted ? key : undefined;
    return accepted.then((ok) => (ok ? key : undefined));
  };

  const attempt = async (ctx: AccessContext, config: LdapAuthConfig, prepared: PreparedLdap): Promise<AuthenticationOutcome> => {
    const proxyHeader = findHeader(ctx, 'proxy-authorization');
    const header = findHeader(ctx, 'authorization');
    if (!proxyHeader && !header) return prepared.refusal;
    let accepted: { given: GivenCredentials; key: string } | undefined;
    for (const value of [proxyHeader?.value, header?.value]) {
      const given = value === undefined ? undefined : credentialsIn(value, prepared.scheme);
      const key = given && (await check(config, prepared, given));
      if (given && key) {
        accepted = { given, key };
        break;
      }
    }
    if (!accepted) return prepared.refusal;
    if (config.hide_credentials) {
      ctx.removeUpstreamHeader('authorization');
      ctx.removeUpstreamHeader('proxy-authorization');
    }
    return { consumer: null, credential: { id: accepted.key, identifier: accepted.given.username } };
  };

  return {
    access(ctx, config, plugin) {
      return authenticateWith(ctx, config, api.consumers, () => attempt(ctx, config, plugin.prepared));
    },
    close: () => directories.close(),
  };
}
