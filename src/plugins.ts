/** The plugins this gateway ships (Kong's bundled plugin list). Each is loaded through its entry module only. */
import entitlementEnforcement from '../plugins/entitlement-enforcement/index.ts';
import metering from '../plugins/metering/index.ts';
import meteringAndBilling from '../plugins/metering-and-billing/index.ts';
import oauth2 from '../plugins/oauth2/index.ts';
import type { PluginDefinition } from './pipeline/plugin-api.ts';

/** In order of creation (the gateway closes them in reverse): request metering after metering, whose writer it uses until it closes. */
export const bundledPlugins: ReadonlyMap<string, PluginDefinition> = new Map(
  [oauth2, metering, entitlementEnforcement, meteringAndBilling].map((p) => [p.name, p as PluginDefinition]),
);
