/** The `--config FILE` option most commands take, and where the file is found without it. */
import type { OptionDefinition, OptionValues } from './command.ts';

export const CONFIG_OPTION: OptionDefinition = {
  type: 'string',
  short: 'c',
  value: 'FILE',
  description: 'the configuration file (default: $GATEWAY_CONFIG, else ./gateway.yaml)',
};

export function configFileOf(options: OptionValues): string {
  return (options.config as string | undefined) ?? process.env.GATEWAY_CONFIG ?? 'gateway.yaml';
}
