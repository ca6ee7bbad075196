/**
 * The path sent upstream: service path + request path, after `strip_path`, following `path_handling`
 * (reference §2.5; golden table in test/src/router/path-handling.test.ts).
 */

export interface UpstreamPathInput {
  /** The service path; null means `/`. */
  servicePath: string | null;
  /** The normalized request path. */
  requestPath: string;
  /** What follows the matched path prefix, or null when the route matched without a path (host-only etc.). */
  postfix: string | null;
  stripPath: boolean;
  pathHandling: 'v0' | 'v1';
}

export function buildUpstreamPath(input: UpstreamPathInput): string {
  const base = input.servicePath || '/';
  const requestPath = input.requestPath;
  // Without a matched path there is nothing to strip: the whole request path (minus its `/`) is the postfix.
  const postfix = input.postfix ?? requestPath.slice(1);
  if (input.pathHandling === 'v1') {
    return joinLiterally(base, input.stripPath ? postfix : requestPath.slice(1));
  }
  return input.stripPath ? joinStrippedV0(base, requestPath, postfix) : joinUnstrippedV0(base, requestPath);
}

/** v1: plain concatenation, only avoiding a doubled `/` at the junction (so `/service` + `route` = `/serviceroute`). */
function joinLiterally(base: string, postfix: string): string {
  if (base.endsWith('/') && postfix.startsWith('/')) return base + postfix.slice(1);
  return base + postfix;
}

/** v0 with strip_path: one `/` between base and postfix; a trailing `/` is kept only when the request had one. */
function joinStrippedV0(base: string, requestPath: string, postfix: string): string {
  const baseWithoutSlash = base.endsWith('/') ? base.slice(0, -1) : base;
  if (postfix === '') {
    if (base === '/') return '/';
    // A base with its own trailing `/` keeps it for any request ending in `/`, the bare `/` included;
    // a base without one gains it only from a longer request that ends in `/`.
    const keepTrailingSlash = base.endsWith('/') ? requestPath.endsWith('/') : requestPath.length > 1 && requestPath.endsWith('/');
    return keepTrailingSlash ? baseWithoutSlash + '/' : baseWithoutSlash;
  }
  return postfix.startsWith('/') ? baseWithoutSlash + postfix : baseWithoutSlash + '/' + postfix;
}

/** v0 without strip_path: the whole request path under the base, and the bare base for `/`. */
function joinUnstrippedV0(base: string, requestPath: string): string {
  if (base.endsWith('/')) return base + requestPath.slice(1);
  return requestPath === '/' ? base : base + requestPath;
}
