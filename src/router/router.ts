/** The request router: compiled once per config, matches with a per-router LRU of results (misses included). */
import type { IncomingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';
import { canonicalName, parseRequestHost } from '../config/hostnames.ts';
import type { Route, Service } from '../config/types.ts';
import type { OperatorRegex, OperatorRegexMatch } from '../operator-regex.ts';
import { compileMatchers, NameKind, type HeaderCondition, type Matcher, type NamePattern } from './compile.ts';
import { escapeUpstreamPath, normalizePath, sanitizePostfix } from './normalize.ts';
import { PrefixIndex } from './prefix-index.ts';
import { buildUpstreamPath } from './upstream-path.ts';

export interface RouteRequest {
  method: string;
  /** Raw request path without the query, as received (may be percent-encoded, may contain ./..). */
  path: string;
  /** Host header (or h2 :authority, or an absolute-form target's authority), may include ':port'; '' when absent. */
  host: string;
  /** The listener's local port (used when host has no port, for route hosts with :port). */
  port: number;
  /** Lowercase names. */
  headers: IncomingHttpHeaders;
  /** TLS servername, when TLS. */
  sni?: string;
  scheme: 'http' | 'https';
}

/** A match result. It is cached and shared between requests: treat it as read-only (it is frozen). */
export interface RouteMatch {
  route: Route;
  /** null for a route without service (the core answers 503). */
  service: Service | null;
  /** Kong-normalized request path. */
  normalizedPath: string;
  /** The stripped prefix when strip_path stripped one and it is not '/', else '' (for X-Forwarded-Prefix). */
  strippedPrefix: string;
  /** Path to send upstream (service path + strip_path + path_handling), escaped as Kong does, without query. */
  upstreamPath: string;
  /** Regex path captures: "0" the whole match, numbered ("1", "2", …) and named (Kong's uri_captures). Only for a regex path match. */
  captures?: Record<string, string>;
}

export interface RouterOptions {
  /** LRU entries; 0 disables the cache. Default: like Kong, 5000 scaled with the route count, at most 100,000. */
  cacheSize?: number;
}

const NO_MATCH = Object.freeze({ noMatch: true });
/** Keys longer than this (huge paths or header values) are not cached, so junk requests cannot bloat memory. */
const MAX_CACHED_KEY_LENGTH = 2048;

/** The request fields a route can look at, decoded once per uncached match. */
interface RequestFacts {
  method: string;
  path: string;
  hostName: string;
  hostPort: number;
  headers: IncomingHttpHeaders;
  /** Lowercased SNI for https requests, '' when https without SNI, null on plaintext (SNI conditions are skipped). */
  sni: string | null;
}

export class Router {
  private readonly matchers: Matcher[];
  private readonly prefixIndex: PrefixIndex;
  private readonly cache: LRUCache<string, RouteMatch | typeof NO_MATCH> | null;
  /** Header names any route looks at: their values are part of the cache key. */
  private readonly headerNames: string[];
  private readonly usesSni: boolean;
  private readonly usesHostPort: boolean;

  constructor(routes: Route[], services: Service[], options: RouterOptions = {}) {
    this.matchers = compileMatchers(routes, services);
    this.prefixIndex = new PrefixIndex(this.matchers.length);
    this.matchers.forEach((matcher, index) => matcher.indexKeys?.forEach((key) => this.prefixIndex.add(key, index)));
    this.headerNames = [...new Set(this.matchers.flatMap((m) => m.headers?.map((h) => h.name) ?? []))].sort();
    this.usesSni = this.matchers.some((m) => m.snis !== null);
    this.usesHostPort = this.matchers.some((m) => m.hosts?.some((h) => h.port !== -1) ?? false);
    const cacheSize = options.cacheSize ?? Math.min(100_000, Math.max(5000, routes.length * 10));
    this.cache = cacheSize > 0 ? new LRUCache({ max: cacheSize }) : null;
  }

  /** The highest-priority route fully matching the request, or null (also for a path normalizePath rejects). */
  match(req: RouteRequest): RouteMatch | null {
    if (this.cache === null) return this.findMatch(req);
    const key = this.cacheKey(req);
    if (key.length > MAX_CACHED_KEY_LENGTH) return this.findMatch(req);
    const cached = this.cache.get(key);
    if (cached !== undefined) return cached === NO_MATCH ? null : (cached as RouteMatch);
    const found = this.findMatch(req);
    this.cache.set(key, found ?? NO_MATCH);
    return found;
  }

  /** Only the inputs some route uses: method, host, path, and port / SNI / header values when routes look at them. */
  private cacheKey(req: RouteRequest): string {
    let key = req.method + '\n' + req.host + '\n' + req.path;
    if (this.usesHostPort) key += '\n' + req.port;
    if (this.usesSni) key += req.scheme === 'https' ? '\ns' + (req.sni ?? '') : '\np';
    for (const name of this.headerNames) {
      const value = req.headers[name];
      key += value === undefined ? '\n\u0001' : '\n' + (Array.isArray(value) ? value.join('\u0002') : value);
    }
    return key;
  }

  private findMatch(req: RouteRequest): RouteMatch | null {
    const path = normalizePath(req.path);
    const host = parseRequestHost(req.host);
    if (path === null || host === null) return null;
    const facts: RequestFacts = {
      method: req.method,
      path,
      // Deviation from Kong (case-sensitive hosts): DNS names are case-insensitive and users expect `API.example.com`
      // to reach the `api.example.com` route; route hosts and SNIs are compiled in the same canonical form.
      hostName: host.name,
      hostPort: host.port >= 0 ? host.port : req.port,
      headers: req.headers,
      sni: req.scheme === 'https' ? canonicalName(req.sni ?? '') : null,
    };
    this.prefixIndex.collect(path);
    for (let index = 0; index < this.matchers.length; index++) {
      const matcher = this.matchers[index];
      // Cheapest rejections first: the prefix index rules out most routes (prefix paths and regexes with a literal
      // head); regexes run last.
      const indexed = matcher.indexKeys !== null ? this.prefixIndex.prefixFor(index) : null;
      if (matcher.indexKeys !== null && indexed === null) continue;
      const prefix = matcher.prefixes !== null ? indexed : null;
      if (!matchesNonPathFields(matcher, facts)) continue;
      if (prefix !== null) return buildMatch(matcher, path, prefix);
      if (matcher.regexes === null) return buildMatch(matcher, path, null);
      const found = matchingRegex(matcher.regexes, path);
      if (found !== null) return buildMatch(matcher, path, found.groups[0]!, capturesOf(found));
    }
    return null;
  }
}

function matchingRegex(regexes: OperatorRegex[], path: string): OperatorRegexMatch | null {
  for (const regex of regexes) {
    const found = regex.exec(path);
    if (found !== null) return found;
  }
  return null;
}

function matchesNonPathFields(matcher: Matcher, facts: RequestFacts): boolean {
  if (matcher.methods !== null && !matcher.methods.has(facts.method)) return false;
  if (matcher.hosts !== null && !anyHostMatches(matcher.hosts, facts)) return false;
  // SNI conditions only apply to https requests (Kong's ATC: `net.protocol != "https" || tls.sni == ...`).
  if (matcher.snis !== null && facts.sni !== null && !anyNameMatches(matcher.snis, facts.sni)) return false;
  if (matcher.headers !== null) {
    for (const condition of matcher.headers) if (!headerMatches(condition, facts.headers)) return false;
  }
  return true;
}

function nameMatches(pattern: NamePattern, name: string): boolean {
  switch (pattern.kind) {
    case NameKind.Exact:
      return name === pattern.text;
    case NameKind.Suffix:
      return name.length > pattern.text.length && name.endsWith(pattern.text);
    default:
      return name.length > pattern.text.length && name.startsWith(pattern.text);
  }
}

function anyNameMatches(patterns: NamePattern[], name: string): boolean {
  for (const pattern of patterns) if (nameMatches(pattern, name)) return true;
  return false;
}

/** Host compared without the request port, unless the route host names a port (then Host's port, else the listener's). */
function anyHostMatches(patterns: NamePattern[], facts: RequestFacts): boolean {
  for (const pattern of patterns) {
    if ((pattern.port === -1 || pattern.port === facts.hostPort) && nameMatches(pattern, facts.hostName)) return true;
  }
  return false;
}

/** Several configured values: any may match; a repeated request header: any of its values may match. */
function headerMatches(condition: HeaderCondition, headers: IncomingHttpHeaders): boolean {
  const received = headers[condition.name];
  if (received === undefined) return false;
  if (!Array.isArray(received)) return headerValueMatches(condition, received);
  for (const value of received) if (headerValueMatches(condition, value)) return true;
  return false;
}

function headerValueMatches(condition: HeaderCondition, value: string): boolean {
  if (condition.values.has(value.toLowerCase())) return true;
  for (const regex of condition.regexes) if (regex.test(value)) return true;
  return false;
}

function capturesOf(found: OperatorRegexMatch): Record<string, string> {
  const captures: Record<string, string> = {};
  found.groups.forEach((value, index) => {
    if (value !== undefined) captures[String(index)] = value;
  });
  for (const [name, value] of Object.entries(found.named)) if (value !== undefined) captures[name] = value;
  return Object.freeze(captures);
}

/** matchedPath: the part of the path the route matched (prefix or whole regex match), null for a path-less route. */
function buildMatch(matcher: Matcher, path: string, matchedPath: string | null, captures?: Record<string, string>): RouteMatch {
  const route = matcher.route;
  const upstreamPath = buildUpstreamPath({
    servicePath: matcher.service?.path ?? null,
    requestPath: path,
    postfix: matchedPath === null ? null : sanitizePostfix(path.slice(matchedPath.length)),
    stripPath: route.strip_path,
    pathHandling: route.path_handling,
  });
  const stripped = route.strip_path && matchedPath !== null && matchedPath !== '/' && matchedPath !== '';
  const result: RouteMatch = {
    route,
    service: matcher.service,
    normalizedPath: path,
    strippedPrefix: stripped ? matchedPath! : '',
    upstreamPath: escapeUpstreamPath(upstreamPath),
  };
  if (captures !== undefined) result.captures = captures;
  return Object.freeze(result);
}
