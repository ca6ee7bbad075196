/**
 * Kong's key-auth handler (kong/plugins/key-auth/handler.lua): the key from the first of `key_names`
 * found in a header, the query or the body (in that order per name), looked up by its digest, so that
 * the lookup's timing says nothing about any stored key. Synchronous unless the body must be read.
 */
import {
  authenticateWith,
  challenge,
  clearBodyParam,
  clearQueryArg,
  credentialBodyParams,
  headerValues,
  parseArgs,
  type AccessContext,
  type AuthenticationOutcome,
  type Params,
  type PluginApi,
  type PluginInstance,
  type PluginRuntime,
} from '../../src/pdk/index.ts';
import { credentialEntity, type KeyAuthConfig, type KeyCredential } from './schema.ts';

const NO_KEY = 'No API key found in request';
const DUPLICATE_KEY = 'Duplicate API key found';
const INVALID_KEY = 'Unauthorized';

/** Where a key was found, for `hide_credentials`. */
interface FoundKey {
  key: string;
  name: string;
  /** The header's name as it arrived (`-` and `_` are one to nginx). */
  header?: string;
}

/** `duplicate`: a key sent twice in one place (Kong refuses rather than pick one); `body`: the body must be read to go on. */
type Search = FoundKey | 'duplicate' | 'body' | undefined;

/** An instance's `WWW-Authenticate` value, made once per configuration. */
export function prepareChallenge(config: KeyAuthConfig): string {
  return challenge('Key', { realm: config.realm });
}

type Instance = PluginInstance<KeyAuthConfig, string>;

export function createRuntime(api: PluginApi): PluginRuntime<KeyAuthConfig, string> {
  const credentials = api.entities<KeyCredential>(credentialEntity.name);

  /** The outcome once the key is known (or known to be missing). */
  const outcome = (ctx: AccessContext, { config, prepared: challengeHeader }: Instance, search: Exclude<Search, 'body'>): AuthenticationOutcome | Promise<AuthenticationOutcome> => {
    const refuse = (message: string): AuthenticationOutcome => ({ status: 401, message, headers: { 'www-authenticate': challengeHeader } });
    if (search === 'duplicate') return refuse(DUPLICATE_KEY);
    if (!search || search.key === '') return refuse(NO_KEY);
    const credential = credentials.find('key', search.key);
    const consumer = credential && api.consumers.byId(credential.consumer.id);
    if (!credential || !consumer) return refuse(INVALID_KEY);
    const authenticated: AuthenticationOutcome = { consumer, credential: { id: credential.id, identifier: credential.id } };
    if (!config.hide_credentials) return authenticated;
    const hidden = hideKey(ctx, search, config);
    return hidden ? hidden.then(() => authenticated) : authenticated;
  };

  return {
    access(ctx, config, plugin) {
      if (!config.run_on_preflight && ctx.method === 'OPTIONS') return;
      return authenticateWith(ctx, config, api.consumers, () => {
        const found = findKey(ctx, config, undefined);
        if (found !== 'body') return outcome(ctx, plugin, found);
        return credentialBodyParams(ctx, { anyMethod: true }).then((body) => outcome(ctx, plugin, findKey(ctx, config, body) as Exclude<Search, 'body'>));
      });
    },
  };
}

/**
 * Kong's search: for each name, the header, then the query, then the body. The first string wins; a value
 * sent twice is a duplicate. The body is read only when the search gets to it (`body` undefined: `'body'`).
 */
function findKey(ctx: AccessContext, config: KeyAuthConfig, body: Params | undefined): Search {
  let query: Params | undefined;
  for (const name of config.key_names) {
    if (config.key_in_header) {
      const values = headerValues(ctx, name);
      if (values.length > 1) return 'duplicate';
      if (values.length === 1) return { key: values[0], name, header: headerNameOf(ctx, name) };
    }
    if (config.key_in_query && ctx.rawQuery !== '') {
      query ??= parseArgs(ctx.rawQuery);
      const value = query[name];
      if (Array.isArray(value)) return 'duplicate';
      if (typeof value === 'string') return { key: value, name };
    }
    if (config.key_in_body) {
      if (!body) return 'body';
      const value = body[name];
      if (Array.isArray(value)) return 'duplicate';
      if (typeof value === 'string') return { key: value, name };
    }
  }
  return undefined;
}

/** The name a header arrived under (`api_key` or `api-key` for either), for removing it. */
function headerNameOf(ctx: AccessContext, name: string): string {
  const lower = name.toLowerCase();
  if (ctx.headers[lower] !== undefined) return lower;
  const wanted = lower.replace(/_/g, '-');
  return Object.keys(ctx.headers).find((h) => h.replace(/_/g, '-') === wanted) ?? lower;
}

/** `hide_credentials`: Kong clears the name from the headers and the query, and from the body when it reads bodies. */
function hideKey(ctx: AccessContext, found: FoundKey, config: KeyAuthConfig): Promise<void> | undefined {
  if (found.header) ctx.removeUpstreamHeader(found.header);
  clearQueryArg(ctx, found.name);
  return config.key_in_body ? clearBodyParam(ctx, found.name, { anyMethod: true }) : undefined;
}
