/**
 * The `entitlement-enforcement` plugin (Kong Gateway 3.16's name and config): refuses requests of
 * customers without a feature or over a metered hard limit, decided in process from billing.
 */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime } from './handler.ts';
import { checkConfig, configSchema, type EnforcementConfig } from './schema.ts';

const entitlementEnforcement: PluginDefinition<EnforcementConfig> = {
  name: 'entitlement-enforcement',
  version: '0.1.0',
  // Kong's priority: after authentication (oauth2 1400), so the consumer is known.
  priority: 915,
  configSchema,
  checkConfig,
  // Keeps nothing of its own: every decision is billing's (the metering plugin's service).
  multiProcess: true,
  uses: ['metering'],
  create: createRuntime,
};

export default entitlementEnforcement;
