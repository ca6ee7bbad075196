/**
 * What a command of the `tollgate` CLI is, and how its arguments are read: Node's parseArgs, with
 * a one-line error (and a suggestion) instead of its stack trace for a mistyped option.
 */
import { parseArgs } from 'node:util';
import { closestName, didYouMean } from '../did-you-mean.ts';
import { UsageError } from '../errors.ts';
import type { PluginRegistry } from '../pdk/types.ts';

export interface OptionDefinition {
  type: 'string' | 'boolean';
  short?: string;
  /** The value's placeholder in the help (`FILE`); string options only. */
  value?: string;
  description: string;
}

export type OptionValues = Record<string, string | boolean | undefined>;

export interface CommandDefinition {
  name: string;
  /** One line, in the overall help. */
  summary: string;
  /** More lines under the command's usage in its own help, if any. */
  details?: string;
  options: Record<string, OptionDefinition>;
  /**
   * Resolves with the process's exit code once the command is done. `plugins`: the plugins this
   * gateway knows, read once by the command line (src/cli.ts) and handed down from here.
   */
  run(options: OptionValues, plugins: PluginRegistry): Promise<number>;
}

/** `storeDamaged`: a restart cannot help (examples/tollgate.service lists it in RestartPreventExitStatus). */
export const EXIT = { ok: 0, failure: 1, usage: 2, storeDamaged: 3 } as const;

export const HELP_OPTION: OptionDefinition = { type: 'boolean', short: 'h', description: 'show this help' };

/** The command's options, `--help` included, as given on the command line. */
export function readOptions(command: CommandDefinition, args: string[]): OptionValues {
  const options = { ...command.options, help: HELP_OPTION };
  try {
    const { values } = parseArgs({ args, options: parseArgsConfig(options), allowPositionals: false, strict: true });
    return values;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (!code?.startsWith('ERR_PARSE_ARGS_')) throw err;
    throw new UsageError(describeParseError(err as NodeJS.ErrnoException, options), command.name);
  }
}

function parseArgsConfig(options: Record<string, OptionDefinition>) {
  return Object.fromEntries(Object.entries(options).map(([name, o]) => [name, { type: o.type, ...(o.short ? { short: o.short } : {}) }]));
}

/** parseArgs's errors, said in one line without its advice about `--`. */
function describeParseError(err: NodeJS.ErrnoException, options: Record<string, OptionDefinition>): string {
  const quoted = /'([^']*)'/.exec(err.message)?.[1] ?? '';
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const names = Object.keys(options).map((n) => `--${n}`);
      return `unknown option '${quoted}'${quoted.startsWith('--') ? didYouMean(quoted, names) : ''}`;
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument '${quoted}'`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      // The quoted text is the option as parseArgs shows it: `-c, --config <value>` or `--help`.
      const name = /--[\w-]+/.exec(quoted)?.[0] ?? quoted;
      return err.message.includes('argument missing') ? `option '${name}' needs a value` : `option '${name}' takes no value`;
    }
    default:
      return err.message.split('\n')[0];
  }
}

/** The command the user meant by `word`, for an unknown command's error. */
export function unknownCommand(word: string, commands: Iterable<string>): UsageError {
  const close = closestName(word, commands);
  return new UsageError(`unknown command '${word}'${close ? `; did you mean '${close}'?` : ''}`);
}
