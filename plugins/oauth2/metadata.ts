/**
 * RFC 8414 authorization-server metadata for each route with the plugin. The issuer is
 * `https://<host><route path prefix>`; the document is served at `<prefix>/.well-known/oauth-authorization-server`
 * (through the route) and at `/.well-known/oauth-authorization-server<prefix>` (RFC 8414 §3.1, a path no
 * route matches, answered from the runtime's `unmatched` hook).
 */
import { canonicalName, type ConfigView, type UnmatchedRequest } from '../../src/pdk/index.ts';
import type { OAuth2Config } from './schema.ts';

export const WELL_KNOWN = '/.well-known/oauth-authorization-server';
/** Where OpenID Connect Discovery 1.0 §4 looks first: appended to the issuer's path. */
export const OIDC_WELL_KNOWN = '/.well-known/openid-configuration';

export function metadataDocument(issuer: string, config: OAuth2Config): Record<string, unknown> {
  const grants: string[] = [];
  if (config.enable_authorization_code) grants.push('authorization_code');
  if (config.enable_implicit_grant) grants.push('implicit');
  if (config.enable_client_credentials) grants.push('client_credentials');
  if (config.enable_password_grant) grants.push('password');
  if (config.enable_authorization_code || config.enable_password_grant) grants.push('refresh_token');
  const responseTypes: string[] = [];
  if (config.enable_authorization_code) responseTypes.push('code');
  if (config.enable_implicit_grant) responseTypes.push('token');
  const clientAuth = ['client_secret_basic', 'client_secret_post', 'none'];
  const document: Record<string, unknown> = {
    issuer,
    token_endpoint: `${issuer}/oauth2/token`,
    token_endpoint_auth_methods_supported: clientAuth,
    introspection_endpoint: `${issuer}/oauth2/introspect`,
    introspection_endpoint_auth_methods_supported: clientAuth,
    revocation_endpoint: `${issuer}/oauth2/revoke`,
    revocation_endpoint_auth_methods_supported: clientAuth,
    grant_types_supported: grants,
    response_types_supported: responseTypes,
  };
  // Kong's authorization endpoint is a back-channel API for the operator's login page (provision_key).
  if (responseTypes.length) document.authorization_endpoint = `${issuer}/oauth2/authorize`;
  if (config.scopes) document.scopes_supported = config.scopes;
  if (config.enable_authorization_code) document.code_challenge_methods_supported = ['S256'];
  return document;
}

/**
 * The issuer of a request: `https://` + the authority the client sent, port included. A client compares
 * the document's issuer with the URL it discovered from (RFC 8414 §3.3), and that URL carries the port.
 */
export function issuerOf(rawHost: string, issuerPathPrefix: string): string {
  return `https://${rawHost}${issuerPathPrefix}`;
}

/** The issuer path of a route: its matched prefix without a trailing slash ('' for `/`). */
export function issuerPath(matchedPrefix: string): string {
  return matchedPrefix.replace(/\/+$/, '');
}

interface MetadataRoute {
  prefix: string;
  hosts: string[] | null;
  config: OAuth2Config;
}

/** Routes with the plugin, by path prefix, for the RFC 8414 §3.1 location. */
export class MetadataDirectory {
  private routes: MetadataRoute[] = [];

  configure(view: ConfigView<OAuth2Config>): void {
    const routes: MetadataRoute[] = [];
    for (const route of view.config.routes) {
      const instance = view.instanceOn(route.id);
      if (!instance) continue;
      const hosts = route.hosts?.map(canonicalName) ?? null;
      for (const path of route.paths ?? []) {
        if (!path.startsWith('~')) routes.push({ prefix: issuerPath(path), hosts, config: instance.config });
      }
    }
    this.routes = routes;
  }

  answer(req: UnmatchedRequest): boolean {
    if (!req.path.startsWith(WELL_KNOWN) || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
    const prefix = req.path.slice(WELL_KNOWN.length);
    const route = this.routes.find((r) => r.prefix === prefix && hostMatches(r.hosts, req.host));
    if (!route) return false;
    req.respond(200, metadataDocument(issuerOf(req.rawHost, prefix), route.config));
    return true;
  }
}

/** `host` is the request's canonical name; `hosts` the route's, made canonical the same way (case, trailing dot). */
function hostMatches(hosts: string[] | null, host: string): boolean {
  if (!hosts?.length) return true;
  return hosts.some((pattern) => {
    if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1));
    if (pattern.endsWith('.*')) return host.startsWith(pattern.slice(0, -1));
    return pattern === host;
  });
}
