/**
 * Turns routes into matchers sorted by Kong's `traditional_compatible` (ATC) priority (kong/router/transform.lua).
 * A route whose paths mix regexes and prefixes of different lengths is split into one matcher per path group,
 * so each group is ranked on its own, as Kong's ATC transform does.
 */
import type { Route, Service } from '../config/types.ts';
import { canonicalName, splitHostPort } from '../config/hostnames.ts';
import { compileOperatorRegex, type OperatorRegex } from '../operator-regex.ts';
import { HEADER_VALUE_REGEX, ROUTE_PATH_REGEX } from './validate.ts';

/** How a host or SNI pattern compares: exact name, `*.example.com` (suffix), `example.*` (prefix). */
export const NameKind = { Exact: 0, Suffix: 1, Prefix: 2 } as const;
export type NameKind = (typeof NameKind)[keyof typeof NameKind];

export interface NamePattern {
  kind: NameKind;
  /** Lowercased; for wildcards the fixed part including its dot (`.example.com`, `example.`). */
  text: string;
  /** -1 when the pattern has no port. */
  port: number;
}

export interface HeaderCondition {
  name: string;
  /** Lowercased plain values (any may match). */
  values: Set<string>;
  /** `~*` values, case-insensitive, unanchored (any may match). */
  regexes: OperatorRegex[];
}

export interface Matcher {
  route: Route;
  service: Service | null;
  methods: Set<string> | null;
  hosts: NamePattern[] | null;
  headers: HeaderCondition[] | null;
  snis: NamePattern[] | null;
  /** Prefix paths of this group (all the same length), or null. */
  prefixes: string[] | null;
  /** Regex paths of this group, or null. */
  regexes: OperatorRegex[] | null;
  /**
   * Texts the path must start with for this matcher to possibly match, fed to the prefix index: the prefix paths,
   * or the literal heads of the regexes (when every regex has one); null when the matcher cannot be pre-filtered.
   */
  indexKeys: string[] | null;
  priority: Priority;
  /** Tie-breaker: the route id (plus the group index for a split route), compared descending. */
  tieKey: string;
}

/** The fields of Kong's 64-bit ATC priority, most significant first. */
export interface Priority {
  matchWeight: number;
  plainHostsOnly: number;
  headerCount: number;
  isRegex: number;
  regexPriority: number;
  maxPrefixLength: number;
}

function nonEmpty<T>(list: T[] | null | undefined): list is T[] {
  return Array.isArray(list) && list.length > 0;
}

/** Compiles and sorts the matchers. Routes whose service is disabled (or unknown) are left out. */
export function compileMatchers(routes: Route[], services: Service[]): Matcher[] {
  const servicesById = new Map(services.map((service) => [service.id, service]));
  const matchers: Matcher[] = [];
  for (const route of routes) {
    let service: Service | null = null;
    if (route.service) {
      const found = servicesById.get(route.service.id);
      if (!found || !found.enabled) continue;
      service = found;
    }
    matchers.push(...compileRoute(route, service));
  }
  return matchers.sort(compareMatchers);
}

function compileRoute(route: Route, service: Service | null): Matcher[] {
  const shared = {
    methods: nonEmpty(route.methods) ? new Set(route.methods) : null,
    hosts: nonEmpty(route.hosts) ? route.hosts.map(compileHost) : null,
    headers: route.headers && Object.keys(route.headers).length > 0 ? compileHeaders(route.headers) : null,
    snis: nonEmpty(route.snis) ? route.snis.map(compileSni) : null,
  };
  const matchWeight =
    Number(shared.methods !== null) + Number(shared.hosts !== null) + Number(shared.headers !== null) +
    Number(shared.snis !== null) + Number(nonEmpty(route.paths));
  const basePriority = {
    matchWeight,
    // Plain hosts only: every host is exact (no wildcard).
    plainHostsOnly: Number(shared.hosts !== null && shared.hosts.every((h) => h.kind === NameKind.Exact)),
    headerCount: Math.min(shared.headers?.length ?? 0, 255),
  };
  const groups = groupPaths(route.paths);
  return groups.map((group): Matcher => {
    const isRegex = group.regexes !== null;
    // One literal with every field in one order: all matchers share a hidden class, keeping the match loop monomorphic.
    return {
      route,
      service,
      methods: shared.methods,
      hosts: shared.hosts,
      headers: shared.headers,
      snis: shared.snis,
      prefixes: group.prefixes,
      regexes: group.regexes,
      indexKeys: group.prefixes ?? regexIndexKeys(group.regexes),
      priority: {
        ...basePriority,
        isRegex: Number(isRegex),
        // Compared as a number: a negative regex_priority ranks below 0, as documented. (Kong's ATC packs it into
        // unsigned bits, where a negative value overflows into the top bits and outranks everything.)
        regexPriority: isRegex ? route.regex_priority : 0,
        maxPrefixLength: group.prefixes ? group.prefixes[0].length : 0,
      },
      // Kong gives every path group of a multi-path route its own uuid5(id + '#' + group); we keep a readable key
      // with the same inputs, so ties among split routes order by route id first.
      tieKey: nonEmpty(route.paths) && route.paths.length > 1 ? `${route.id}#${group.regexes ? 'regex' : group.prefixes![0].length}` : route.id,
    };
  });
}

interface PathGroup {
  prefixes: string[] | null;
  regexes: OperatorRegex[] | null;
}

/** One group for all regexes, then one per prefix length; a route without paths is one path-less group. */
function groupPaths(paths: string[] | null): PathGroup[] {
  if (!nonEmpty(paths)) return [{ prefixes: null, regexes: null }];
  const regexes: OperatorRegex[] = [];
  const prefixesByLength = new Map<number, string[]>();
  for (const path of paths) {
    if (path.startsWith('~')) {
      regexes.push(compileOperatorRegex(path.slice(1), ROUTE_PATH_REGEX));
    } else {
      const sameLength = prefixesByLength.get(path.length) ?? [];
      sameLength.push(path);
      prefixesByLength.set(path.length, sameLength);
    }
  }
  const groups: PathGroup[] = regexes.length > 0 ? [{ prefixes: null, regexes }] : [];
  for (const prefixes of prefixesByLength.values()) groups.push({ prefixes, regexes: null });
  return groups;
}

function regexIndexKeys(regexes: OperatorRegex[] | null): string[] | null {
  if (regexes === null) return null;
  const heads = regexes.map(literalHeadOf);
  return heads.every((head) => head.length > 1) ? heads : null;
}

const REGEX_SPECIAL = '^$.*+?()[]{}|';

/**
 * The literal text every match of an anchored route regex starts with ('' when unknown), e.g. `/v1/users/` for
 * `/v1/users/(\d+)`. Conservative: stops at the first construct it does not read as one literal character.
 */
export function literalHeadOf(regex: OperatorRegex): string {
  const pattern = regex.source;
  if (regex.options.ignoreCase || !regex.options.anchored || pattern.includes('|')) return '';
  let head = '';
  for (let i = 0; i < pattern.length; i++) {
    let char = pattern[i];
    if (REGEX_SPECIAL.includes(char)) {
      // `x?`, `x*`, `x{0,}` make the last literal optional; `x+` keeps it.
      return char === '?' || char === '*' || char === '{' ? head.slice(0, -1) : head;
    }
    if (char === '\\') {
      const escaped = pattern[i + 1];
      if (escaped === undefined || /[A-Za-z0-9]/.test(escaped)) return head; // \d, \w, \1, \Q…: not one literal
      char = escaped;
      i++;
    }
    head += char;
  }
  return head;
}

/** Patterns are kept in the canonical form request names are compared in. */
function compileNamePattern(name: string, port: number): NamePattern {
  const lower = canonicalName(name);
  if (lower.startsWith('*.')) return { kind: NameKind.Suffix, text: lower.slice(1), port };
  if (lower.endsWith('.*')) return { kind: NameKind.Prefix, text: lower.slice(0, -1), port };
  return { kind: NameKind.Exact, text: lower, port };
}

function compileHost(host: string): NamePattern {
  const { name, port } = splitHostPort(host);
  return compileNamePattern(name, port);
}

function compileSni(sni: string): NamePattern {
  return compileNamePattern(sni, -1);
}

function compileHeaders(headers: Record<string, string[]>): HeaderCondition[] {
  return Object.entries(headers).map(([name, configured]) => {
    const values = new Set<string>();
    const regexes: OperatorRegex[] = [];
    for (const value of configured) {
      if (value.startsWith('~*')) regexes.push(compileOperatorRegex(value.slice(2), HEADER_VALUE_REGEX));
      else values.add(value.toLowerCase());
    }
    return { name: name.toLowerCase(), values, regexes };
  });
}

const PRIORITY_FIELDS: (keyof Priority)[] = ['matchWeight', 'plainHostsOnly', 'headerCount', 'isRegex', 'regexPriority', 'maxPrefixLength'];

/** Descending priority, then descending tie key (ATC iterates its BTreeMap of (priority, uuid) in reverse). */
export function compareMatchers(a: Matcher, b: Matcher): number {
  for (const field of PRIORITY_FIELDS) {
    const difference = b.priority[field] - a.priority[field];
    if (difference !== 0) return difference;
  }
  return a.tieKey < b.tieKey ? 1 : a.tieKey > b.tieKey ? -1 : 0;
}
