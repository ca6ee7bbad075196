/**
 * The commands of `tollgate`, and its help and version. A new command is a CommandDefinition
 * (usually in its own module) added to COMMANDS.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../errors.ts';
import { PACKAGE_ROOT } from '../package-root.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { check } from './check.ts';
import { dbExport, dbImport } from './config-db.ts';
import { EXIT, HELP_OPTION, readOptions, unknownCommand, type CommandDefinition, type OptionDefinition } from './command.ts';
import { health, reload, status, stop } from './control.ts';
import { start } from './start.ts';
import { migrate, storeCopy, storeRepair } from './store.ts';

const PACKAGE = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string };

export const EXIT_CODES = 'Exit codes: 0 success; 1 failure (invalid configuration, port in use, unusable data directory); 2 bad usage; 3 the embedded store is damaged (see store:repair).';

const version: CommandDefinition = {
  name: 'version',
  summary: 'print the version',
  options: {},
  async run() {
    console.log(PACKAGE.version);
    return EXIT.ok;
  },
};

const help: CommandDefinition = {
  name: 'help',
  summary: "show the help of every command, or of one: 'tollgate help start'",
  options: {},
  // Takes the command's name as its only argument: see runCli.
  async run() {
    console.log(overallHelp());
    return EXIT.ok;
  },
};

export const COMMANDS: CommandDefinition[] = [start, stop, reload, status, health, check, migrate, storeCopy, storeRepair, dbImport, dbExport, version, help];

function find(name: string): CommandDefinition | undefined {
  return COMMANDS.find((c) => c.name === name);
}

function optionLines(options: Record<string, OptionDefinition>): string[] {
  const labels = Object.entries(options).map(([name, o]) => `${o.short ? `-${o.short}, ` : '    '}--${name}${o.value ? ` ${o.value}` : ''}`);
  const width = Math.max(...labels.map((l) => l.length));
  return Object.values(options).map((o, i) => `  ${labels[i].padEnd(width)}  ${o.description}`);
}

export function overallHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'Usage: tollgate <command> [options]',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Options:',
    ...optionLines({ help: HELP_OPTION, version: { type: 'boolean', short: 'v', description: 'print the version' } }),
    '',
    "Run 'tollgate <command> --help' for the options of a command.",
    EXIT_CODES,
  ].join('\n');
}

export function commandHelp(command: CommandDefinition): string {
  const options = { ...command.options, help: HELP_OPTION };
  return [
    `Usage: tollgate ${command.name}${Object.keys(command.options).length ? ' [options]' : ''}`,
    '',
    command.summary[0].toUpperCase() + command.summary.slice(1) + '.',
    ...(command.details ? [command.details] : []),
    '',
    'Options:',
    ...optionLines(options),
    '',
    EXIT_CODES,
  ].join('\n');
}

/** Runs the command line `args` (without node and the script); resolves with the exit code. */
export async function runCli(args: string[], plugins: PluginRegistry): Promise<number> {
  try {
    return await dispatch(args, plugins);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    const helpCommand = err.command ? `tollgate ${err.command} --help` : 'tollgate --help';
    console.error(`tollgate${err.command ? ` ${err.command}` : ''}: ${err.message} (see '${helpCommand}')`);
    return EXIT.usage;
  }
}

/** Kong's two-word commands (`kong config db_import FILE`, the file positional) as Tollgate names them (`config:db_import --file FILE`). */
function joinedTwoWord(args: string[]): string[] {
  const [first, second, ...rest] = args;
  if (first !== 'config' || second === undefined || !find(`config:${second}`)) return args;
  const [file, ...options] = rest;
  return file !== undefined && !file.startsWith('-') ? [`config:${second}`, '--file', file, ...options] : [`config:${second}`, ...rest];
}

async function dispatch(args: string[], plugins: PluginRegistry): Promise<number> {
  const [first, ...rest] = joinedTwoWord(args);
  if (first === undefined) {
    console.error(overallHelp());
    return EXIT.usage;
  }
  if (first === '--help' || first === '-h') return help.run({}, plugins);
  if (first === '--version' || first === '-v') return version.run({}, plugins);
  if (first.startsWith('-')) throw new UsageError(`unknown option '${first}': options come after the command`);
  if (first === 'help' && rest.length > 0) {
    const topic = find(rest[0]);
    if (!topic || rest.length > 1) throw unknownCommand(rest.join(' '), COMMANDS.map((c) => c.name));
    console.log(commandHelp(topic));
    return EXIT.ok;
  }
  const command = find(first);
  if (!command) throw unknownCommand(first, COMMANDS.map((c) => c.name));
  const options = readOptions(command, rest);
  if (options.help) {
    console.log(commandHelp(command));
    return EXIT.ok;
  }
  return command.run(options, plugins);
}
