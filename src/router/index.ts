/**
 * Tollgate's router: Kong 3.x `traditional_compatible` route selection, path normalization and upstream path
 * building. Pure (no I/O): the core builds one Router per config and calls `match` on every request.
 */
export { Router, type RouteMatch, type RouteRequest, type RouterOptions } from './router.ts';
export { normalizePath, escapeUpstreamPath } from './normalize.ts';
export { validateRoutePath, validateRouteHost, validateRouteHeaderValue } from './validate.ts';
export { buildUpstreamPath } from './upstream-path.ts';
