/**
 * The `metering` plugin: OpenMeter/Konnect v3 event ingestion, meters and usage
 * queries answered under its route, on LevelDB through the core's store, behind an auth plugin.
 */
import { join } from 'node:path';
import { PACKAGE_ROOT, type ConsoleTab, type PluginDefinition } from '../../src/pdk/index.ts';
import { billingEntities } from './billing/port.ts';
import { createRuntime } from './handler.ts';
import { storeProcedures } from './service.ts';
import { checkConfig, collectorEntity, configSchema, meterEntity, type MeteringConfig } from './schema.ts';

/** A console tab of console/: its section's markup `<id>.html`, its module `<id>.js`. */
function consoleTab(id: string, title: string): ConsoleTab {
  const file = join(PACKAGE_ROOT, 'plugins/metering/console', id);
  return { id, title, markup: `${file}.html`, script: `${file}.js` };
}

const metering: PluginDefinition<MeteringConfig> = {
  name: 'metering',
  version: '0.1.0',
  // After authentication (oauth2 runs at 1400), so the token's scopes are known.
  priority: 900,
  // On a shared store, events go to one aggregator: the primary's single writer on LevelDB, an elected process's over PostgreSQL's journal.
  multiProcess: true,
  configSchema,
  checkConfig,
  entities: [meterEntity, collectorEntity, ...billingEntities],
  storeProcedures,
  console: { tabs: [consoleTab('usage', 'Usage'), consoleTab('billing', 'Billing'), consoleTab('metering', 'Metering')] },
  create: createRuntime,
};

export default metering;
