/** Kong's `ip-restriction` plugin: allow and deny lists of addresses and CIDR ranges, IPv4 and IPv6. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareLists, type Lists } from './handler.ts';
import { configSchema, type IpRestrictionConfig } from './schema.ts';

const ipRestriction: PluginDefinition<IpRestrictionConfig, Lists> = {
  name: 'ip-restriction',
  version: '0.1.0',
  // Kong's PRIORITY: after authentication (so consumer-scoped lists apply), before rate limiting.
  priority: 990,
  multiProcess: true,
  configSchema,
  prepare: prepareLists,
  create: createRuntime,
};

export default ipRestriction;
