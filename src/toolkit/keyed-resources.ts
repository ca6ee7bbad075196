/**
 * What a plugin keeps per key across configurations (a queue per name, a file per path, a connection per
 * destination): made when a configuration first names the key, given the new settings on each reload,
 * closed once no configuration names it.
 */
export interface KeyedResource<Settings> {
  /** Takes new settings; false when the resource cannot, and must be closed and made again. */
  reconfigure(settings: Settings): boolean;
  close(): Promise<void>;
}

/** Brings `resources` in line with `wanted` (key to settings), in place. */
export async function reconcileResources<Settings, R extends KeyedResource<Settings>>(
  resources: Map<string, R>,
  wanted: ReadonlyMap<string, Settings>,
  make: (key: string, settings: Settings) => R | Promise<R>,
): Promise<void> {
  for (const [key, resource] of resources) {
    const settings = wanted.get(key);
    if (settings !== undefined && resource.reconfigure(settings)) continue;
    resources.delete(key);
    await resource.close();
  }
  for (const [key, settings] of wanted) if (!resources.has(key)) resources.set(key, await make(key, settings));
}
