/** Validates one plugin instance through the real loader; the errors come back as `config.path: message`. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../src/config/load.ts';
import { bundledPlugins } from '../../src/plugins.ts';
import { tempDir } from '../helpers/gateway.ts';

/** The errors of a route `/` carrying plugin `name` with `config` (none when it loads). */
export async function pluginConfigErrors(name: string, config: Record<string, unknown>, entity: Record<string, unknown> = {}): Promise<string[]> {
  const file = join(tempDir(), 'gateway.yaml');
  writeFileSync(file, stringify({ _format_version: '3.0', routes: [{ name: 'r', paths: ['/'], plugins: [{ name, config, ...entity }] }] }));
  const loaded = await loadConfigFile(file, bundledPlugins);
  const prefix = 'routes[0].plugins[0].';
  return loaded.ok ? [] : loaded.errors.map((e) => `${e.path.startsWith(prefix) ? e.path.slice(prefix.length) : e.path}: ${e.message}`);
}
