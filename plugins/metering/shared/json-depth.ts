/** How deep a JSON value nests: refused beyond a limit, before it is stored or read back recursively. */
/** True when `value` nests objects/arrays deeper than `limit` (iterative: safe on hostile input). */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  // Usual case, flat data: no allocation.
  let flat = true;
  for (const key in value) {
    const child = (value as Record<string, unknown>)[key];
    if (typeof child === 'object' && child !== null) {
      flat = false;
      break;
    }
  }
  if (flat) return false;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}
