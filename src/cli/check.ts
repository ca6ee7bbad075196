/** `tollgate check`: validates a configuration file without starting anything. */
import { availableParallelism } from 'node:os';
import { loadConfigFile } from '../config/load.ts';
import type { GatewayConfig } from '../config/types.ts';
import { EXIT, type CommandDefinition } from './command.ts';
import { CONFIG_OPTION, configFileOf } from './config-option.ts';

export const check: CommandDefinition = {
  name: 'check',
  summary: 'validate a configuration file and exit',
  details: [
    'Exit 0 when it is valid; exit 1 printing every error as FILE:LINE:COL: path.to.field: message.',
    'A valid file may get warnings on stderr (exit 0 still): settings that make no sense on this machine.',
  ].join('\n'),
  options: { config: CONFIG_OPTION },
  async run(options, plugins) {
    const file = configFileOf(options);
    const result = await loadConfigFile(file, plugins);
    if (result.ok) {
      console.log(`${file}: configuration is valid`);
      if (result.config.oneProcessBecause) console.log(`${file}: ${result.config.oneProcessBecause}`);
      // What is accepted but not applied (a stream route, decK's metadata) is worth knowing before a start.
      for (const warning of result.config.warnings) console.error(`warning: ${warning}`);
      for (const warning of machineWarnings(result.config)) console.error(`warning: ${file}: ${warning}`);
      return EXIT.ok;
    }
    for (const error of result.errors) console.error(String(error));
    return EXIT.failure;
  },
};

/**
 * Settings valid in themselves that make no sense on the machine `check` runs on (most often the one
 * that will run the file). Only the clearly wrong: a warning nobody needs to act on teaches to ignore them.
 */
function machineWarnings(config: GatewayConfig): string[] {
  const cores = availableParallelism();
  const warnings: string[] = [];
  const workers = config.gateway.worker_processes;
  // Each process takes a core when busy: more processes than cores only add memory and context switches.
  if (typeof workers === 'number' && workers > cores) {
    warnings.push(`gateway.worker_processes: ${workers} processes on a machine with ${cores} cores: more than one per core only costs memory; use 'auto' (one per core)`);
  }
  return warnings;
}
