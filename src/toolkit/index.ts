/**
 * The plugin toolkit: what authentication and entity-owning plugins share, re-exported by the plugin API
 * (plugins import it from there only). Kong's admin errors and paging, schema validation, request
 * parameters, secrets and their hashing, the entity directory and its generated admin API, and
 * `authenticate` with Kong's identity headers and anonymous fallback.
 */
export * from './admin-errors.ts';
export * from './paging.ts';
export * from './limits.ts';
export * from './json.ts';
export * from './params.ts';
export * from './secrets.ts';
export { SecretVerifier } from './secret-verifier.ts';
export * from './entity-directory.ts';
export * from './entity-admin.ts';
export * from './authenticate.ts';
