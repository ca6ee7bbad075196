/** Kong's `acl` plugin on Tollgate's plugin API: allow or deny consumers by group, after any authentication plugin. */
import type { PluginDefinition } from '../../src/pdk/index.ts';
import { createRuntime, prepareRule, type Rule } from './handler.ts';
import { aclEntity, configSchema, type AclConfig } from './schema.ts';

const acl: PluginDefinition<AclConfig, Rule> = {
  name: 'acl',
  version: '0.1.0',
  priority: 950,
  multiProcess: true,
  noConsumer: true,
  configSchema,
  entities: [aclEntity],
  prepare: prepareRule,
  create: createRuntime,
};

export default acl;
