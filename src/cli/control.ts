/**
 * `tollgate stop`, `reload` and `status` (alias `health`): Kong's `kong stop|reload|health` for a node
 * `tollgate start` runs. They find it by its pid file (that of the configuration's data directory, or
 * --pid-file), signal it as an operator would (SIGTERM stops, SIGHUP reloads), and ask its admin API
 * (the file's admin_listen) what it says.
 */
import http from 'node:http';
import https from 'node:https';
import { readFileSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseListenList } from '../config/listen.ts';
import { loadConfigFile } from '../config/load.ts';
import type { GatewayConfig } from '../config/types.ts';
import { ControlError, UsageError } from '../errors.ts';
import { pidFilePath, PID_FILE_NAME } from '../process/pid-file.ts';
import { EXIT, type CommandDefinition, type OptionDefinition, type OptionValues } from './command.ts';
import { CONFIG_OPTION, configFileOf } from './config-option.ts';
import type { PluginRegistry } from '../pdk/types.ts';

const PID_FILE_OPTION: OptionDefinition = { type: 'string', value: 'FILE', description: `the pid file start wrote (default: <data_dir>/${PID_FILE_NAME})` };
const POLL_MS = 100;
/** An admin API that does not answer in this time is reported as not answering. */
const ADMIN_TIMEOUT_MS = 5000;

function timeoutOption(defaultSeconds: number, what: string): OptionDefinition {
  return { type: 'string', value: 'SECONDS', description: `how long to wait for ${what} (default ${defaultSeconds})` };
}

function timeoutOf(options: OptionValues, defaultSeconds: number, command: string): number {
  if (options.timeout === undefined) return defaultSeconds * 1000;
  const seconds = Number(options.timeout);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 3600) throw new UsageError('--timeout must be a number of seconds between 0 and 3600', command);
  return seconds * 1000;
}

/** Runs a command's body; a ControlError is its one line on stderr and exit 1. */
function controlCommand(name: string, body: CommandDefinition['run']): CommandDefinition['run'] {
  return async (options, plugins) => {
    try {
      return await body(options, plugins);
    } catch (err) {
      if (!(err instanceof ControlError)) throw err;
      console.error(`tollgate ${name}: ${err.message}`);
      return EXIT.failure;
    }
  };
}

/** The configuration, or a ControlError listing why it cannot be read. */
async function configOf(options: OptionValues, plugins: PluginRegistry): Promise<GatewayConfig> {
  const file = configFileOf(options);
  const result = await loadConfigFile(file, plugins);
  if (result.ok) return result.config;
  for (const error of result.errors) console.error(String(error));
  // The running node may be on an earlier, valid version of the file: --pid-file still finds it.
  throw new ControlError(`${file} is invalid (${result.errors.length} error${result.errors.length === 1 ? '' : 's'} above)${options['pid-file'] === undefined ? '; --pid-file finds the node without it' : ''}`);
}

interface RunningNode {
  pid: number;
  pidFile: string;
}

/** The node the pid file names, alive; a stale file (its process gone) is removed, as nothing else will. */
function runningNode(pidFile: string): RunningNode {
  let text: string;
  try {
    text = readFileSync(pidFile, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ControlError(`not running: no pid file ${pidFile}`);
    throw new ControlError(`cannot read the pid file ${pidFile}: ${(err as Error).message}`);
  }
  const pid = Number(text.trim());
  if (!Number.isInteger(pid) || pid <= 1) throw new ControlError(`the pid file ${pidFile} holds no pid: '${text.trim().slice(0, 40)}'`);
  if (!isAlive(pid)) {
    rmSync(pidFile, { force: true });
    throw new ControlError(`not running: process ${pid} of ${pidFile} is gone (a crash or kill -9); the stale pid file is removed`);
  }
  return { pid, pidFile };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // Alive, but another user's: signalling it below says so.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signal(node: RunningNode, name: NodeJS.Signals): void {
  try {
    process.kill(node.pid, name);
  } catch (err) {
    throw new ControlError(`cannot send ${name} to process ${node.pid}: ${(err as NodeJS.ErrnoException).code === 'EPERM' ? 'it belongs to another user' : (err as Error).message}`);
  }
}

/** The pid file of --pid-file or of the configuration's data directory (the file is read only for that then). */
async function nodeOf(options: OptionValues, plugins: PluginRegistry, config?: GatewayConfig): Promise<RunningNode> {
  const option = options['pid-file'] as string | undefined;
  if (option !== undefined) return runningNode(pidFilePath(option, ''));
  return runningNode(pidFilePath(undefined, (config ?? (await configOf(options, plugins))).gateway.data_dir));
}

export const stop: CommandDefinition = {
  name: 'stop',
  summary: 'stop the gateway the configuration (or --pid-file) names, gracefully, and wait until it is gone',
  details: [
    'Sends SIGTERM to the pid in the pid file: in-flight requests finish (within shutdown_timeout), usage is written.',
    'Exit 0 once the process is gone; 1 when it is not running (a stale pid file is removed) or still runs after --timeout.',
  ].join('\n'),
  options: { config: CONFIG_OPTION, 'pid-file': PID_FILE_OPTION, timeout: timeoutOption(30, 'the process to exit') },
  run: controlCommand('stop', async (options, plugins) => {
    const timeoutMs = timeoutOf(options, 30, 'stop');
    const node = await nodeOf(options, plugins);
    signal(node, 'SIGTERM');
    await pollUntil(
      () => !isAlive(node.pid),
      timeoutMs,
      () => new ControlError(`process ${node.pid} still runs ${timeoutMs / 1000} s after SIGTERM (its log says what it waits for); kill -9 would lose usage not yet written`),
    );
    console.log(`stopped (pid ${node.pid})`);
    return EXIT.ok;
  }),
};

export const reload: CommandDefinition = {
  name: 'reload',
  summary: 'check the configuration file, then have the running gateway reload it (SIGHUP)',
  details: [
    'An invalid file is not signalled: its errors are printed, exit 1. With an admin API, waits until it serves',
    "the file's configuration_hash (--timeout); without one, the log says whether it reloaded.",
  ].join('\n'),
  options: { config: CONFIG_OPTION, 'pid-file': PID_FILE_OPTION, timeout: timeoutOption(10, 'the new configuration to be served') },
  run: controlCommand('reload', async (options, plugins) => {
    const timeoutMs = timeoutOf(options, 10, 'reload');
    const config = await configOf(options, plugins);
    const node = await nodeOf(options, plugins, config);
    signal(node, 'SIGHUP');
    const admin = adminUrl(config);
    if (admin === undefined) {
      console.log(`SIGHUP sent to process ${node.pid}: without an admin API, its log says whether ${config.file} was reloaded`);
      return EXIT.ok;
    }
    await pollUntil(
      async () => (await adminGet(admin, '/status').catch(() => undefined))?.body?.configuration_hash === config.hash,
      timeoutMs,
      () => new ControlError(`process ${node.pid} does not serve ${config.file} ${timeoutMs / 1000} s after SIGHUP: its log says why`),
    );
    console.log(`reloaded ${config.file} (pid ${node.pid}, configuration_hash ${config.hash})`);
    return EXIT.ok;
  }),
};

export const status: CommandDefinition = {
  name: 'status',
  summary: "is the gateway running and ready? (Kong's health)",
  details: [
    "Running: the pid file's process is alive. Ready: the admin API (admin_listen) answers GET /status/ready with 200.",
    'Exit 0 when running and ready (or running, with the admin API off); 1 otherwise.',
  ].join('\n'),
  options: { config: CONFIG_OPTION, 'pid-file': PID_FILE_OPTION },
  run: controlCommand('status', async (options, plugins) => {
    const config = await configOf(options, plugins);
    const node = await nodeOf(options, plugins, config);
    console.log(`running (pid ${node.pid})`);
    const admin = adminUrl(config);
    if (admin === undefined) {
      console.log('admin API off (admin_listen): readiness not checked');
      return EXIT.ok;
    }
    const [ready, figures] = await Promise.all([adminGet(admin, '/status/ready'), adminGet(admin, '/status')]).catch((err: Error) => {
      throw new ControlError(`the admin API at ${admin} does not answer: ${err.message}`);
    });
    const server = figures.body?.server ?? {};
    console.log(`${ready.status === 200 ? 'ready' : `not ready (${ready.body?.message ?? ready.status})`}: ${admin}/status/ready answered ${ready.status}`);
    console.log(`connections_active ${server.connections_active}, total_requests ${server.total_requests}, database reachable: ${figures.body?.database?.reachable}, configuration_hash ${figures.body?.configuration_hash}`);
    return ready.status === 200 ? EXIT.ok : EXIT.failure;
  }),
};

/** Kong's name for status. */
export const health: CommandDefinition = { ...status, name: 'health', summary: 'the same as status (Kong\'s name for it)' };

/** The admin API's first listener, reached on loopback when it listens on every address. */
function adminUrl(config: GatewayConfig): string | undefined {
  const spec = parseListenList(config.gateway.admin_listen).specs[0];
  if (spec === undefined) return undefined;
  const host = spec.host === '0.0.0.0' ? '127.0.0.1' : spec.host === '::' ? '[::1]' : spec.host.includes(':') ? `[${spec.host}]` : spec.host;
  return `${spec.ssl ? 'https' : 'http'}://${host}:${spec.port}`;
}

interface AdminReply {
  status: number;
  body: any;
}

function adminGet(base: string, path: string): Promise<AdminReply> {
  const url = new URL(path, base);
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    // The node's own admin API, at the address its file gives: its certificate is often the generated, self-signed one.
    const req = client.get(url, { timeout: ADMIN_TIMEOUT_MS, rejectUnauthorized: false, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${ADMIN_TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
  });
}

/** Polls `done` every POLL_MS until it holds; throws `failure()` once `timeoutMs` have passed. */
async function pollUntil(done: () => boolean | Promise<boolean>, timeoutMs: number, failure: () => ControlError): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw failure();
    await sleep(POLL_MS);
  }
}
