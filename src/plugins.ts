/** The plugins this gateway ships (Kong's bundled plugin list). Each is loaded through its entry module only. */
import entitlementEnforcement from '../plugins/entitlement-enforcement/index.ts';
import metering from '../plugins/metering/index.ts';
import oauth2 from '../plugins/oauth2/index.ts';
import type { PluginDefinition } from './pipeline/plugin-api.ts';

export const bundledPlugins: ReadonlyMap<string, PluginDefinition> = new Map(
  [oauth2, metering, entitlementEnforcement].map((p) => [p.name, p as PluginDefinition]),
);
