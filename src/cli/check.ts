/** `tollgate check`: validates a configuration file without starting anything. */
import { loadConfigFile } from '../config/load.ts';
import { bundledPlugins } from '../plugins.ts';
import { EXIT, type CommandDefinition } from './command.ts';
import { CONFIG_OPTION, configFileOf } from './config-option.ts';

export const check: CommandDefinition = {
  name: 'check',
  summary: 'validate a configuration file and exit',
  details: 'Exit 0 when it is valid (printing each warning); exit 1 printing every error as FILE:LINE:COL: path.to.field: message.',
  options: { config: CONFIG_OPTION },
  async run(options) {
    const file = configFileOf(options);
    const result = await loadConfigFile(file, bundledPlugins);
    if (result.ok) {
      console.log(`${file}: configuration is valid`);
      // What is accepted but not applied (a stream route, decK's metadata) is worth knowing before a start.
      for (const warning of result.config.warnings) console.error(`warning: ${warning}`);
      if (result.config.oneProcessBecause) console.log(`${file}: ${result.config.oneProcessBecause}`);
      return EXIT.ok;
    }
    for (const error of result.errors) console.error(String(error));
    return EXIT.failure;
  },
};
