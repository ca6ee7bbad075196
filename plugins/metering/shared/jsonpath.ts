/**
 * The JSONPath subset meters use for `value_property` and `dimensions` (ClickHouse's `JSON_VALUE`
 * subset: `$.a.b`, `$['a']`, `$["a"]`, `$.a[0]`). Compiled once per meter into a plain step list, so
 * extraction on the ingest hot path is a loop over property lookups.
 */
export type PathStep = string | number;

/** Parses a path; undefined when the syntax is not supported. */
export function compileJsonPath(path: string): PathStep[] | undefined {
  if (!path.startsWith('$')) return undefined;
  const steps: PathStep[] = [];
  let i = 1;
  while (i < path.length) {
    const c = path[i];
    if (c === '.') {
      const match = /^[A-Za-z_][A-Za-z0-9_\-]*/.exec(path.slice(i + 1));
      if (!match) return undefined;
      steps.push(match[0]);
      i += 1 + match[0].length;
    } else if (c === '[') {
      const rest = path.slice(i);
      const quoted = /^\[\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\]/.exec(rest);
      const index = /^\[\s*(\d+)\s*\]/.exec(rest);
      if (quoted) {
        steps.push((quoted[1] ?? quoted[2]).replace(/\\(.)/g, '$1'));
        i += quoted[0].length;
      } else if (index) {
        steps.push(Number(index[1]));
        i += index[0].length;
      } else {
        return undefined;
      }
    } else {
      return undefined;
    }
  }
  return steps;
}

export const MISSING: unique symbol = Symbol('missing');

/** The value at the path, or MISSING when a step does not exist. */
export function lookup(data: unknown, steps: PathStep[]): unknown {
  let current: unknown = data;
  for (const step of steps) {
    if (current === null || typeof current !== 'object') return MISSING;
    if (typeof step === 'number') {
      if (!Array.isArray(current) || step >= current.length) return MISSING;
      current = current[step];
    } else {
      if (Array.isArray(current) || !Object.prototype.hasOwnProperty.call(current, step)) return MISSING;
      current = (current as Record<string, unknown>)[step];
    }
  }
  return current;
}

/**
 * ClickHouse `JSON_VALUE` text: scalars as text (strings unquoted, `null` as "null"); objects,
 * arrays and missing paths as "".
 */
export function jsonValueText(value: unknown): string {
  if (value === MISSING || value === undefined) return '';
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
      // 1e400 parses to Infinity, which the stored event holds as null: read it as null here too, so
      // ingest and a later backfill see the same value.
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      return '';
  }
}
