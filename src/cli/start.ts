/**
 * `tollgate start`: runs the gateway until SIGTERM or SIGINT; SIGHUP reloads the configuration. The
 * pid goes to a file (by default in the data directory, which only this gateway may use), so scripts
 * signal this gateway and no other one on the machine.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigLoadError, Gateway, StartupError } from '../gateway.ts';
import { createLogger, type Logger } from '../log.ts';
import { EXIT, type CommandDefinition } from './command.ts';
import { CONFIG_OPTION, configFileOf } from './config-option.ts';

const PID_FILE_NAME = 'tollgate.pid';
/** How often a gateway started by npm checks that npm is still there. */
const PARENT_CHECK_MS = 1000;

export const start: CommandDefinition = {
  name: 'start',
  summary: 'run the gateway',
  details: [
    'Prints one line per listener, then serves. SIGTERM or SIGINT: finish in-flight requests, flush, exit 0.',
    'SIGHUP: re-read the configuration file (an invalid one is logged and ignored).',
    `The pid is written to --pid-file, by default ${PID_FILE_NAME} in the data directory.`,
  ].join('\n'),
  options: {
    config: CONFIG_OPTION,
    'pid-file': { type: 'string', value: 'FILE', description: `where to write the pid (default: <data_dir>/${PID_FILE_NAME})` },
  },
  run: (options) => runGateway(configFileOf(options), options['pid-file'] as string | undefined),
};

async function runGateway(file: string, pidFileOption: string | undefined): Promise<number> {
  let gateway: Gateway;
  try {
    gateway = await Gateway.start(file);
  } catch (err) {
    reportStartFailure(file, err);
    return EXIT.failure;
  }
  const log = createLogger('info');
  const pidFile = resolve(pidFileOption ?? join(gateway.config.gateway.data_dir, PID_FILE_NAME));
  try {
    writeFileSync(pidFile, `${process.pid}\n`);
  } catch (err) {
    console.error(`tollgate: cannot write the pid file ${pidFile}: ${(err as Error).message}`);
    await gateway.stop();
    return EXIT.failure;
  }
  for (const l of gateway.proxyListeners) log.info({ url: l.url, listen: l.spec.text }, `proxy listening on ${l.url} (${l.spec.text})`);
  for (const l of gateway.adminListeners) log.info({ url: l.url, listen: l.spec.text }, `admin listening on ${l.url} (${l.spec.text})`);
  log.info({ config: file, pid_file: pidFile }, `started, pid ${process.pid} (in ${pidFile}): SIGHUP reloads ${file}, SIGTERM stops`);
  return new Promise((exit) => {
    let stopping = false;
    const stop = (reason: string) => {
      // npm relays the terminal's Ctrl-C that the gateway got too: one stop is enough.
      if (stopping) return;
      stopping = true;
      log.info({ reason }, 'shutting down');
      gateway.stop().then(
        () => {
          removePidFile(pidFile);
          exit(EXIT.ok);
        },
        (err) => {
          log.error({ err }, 'shutdown failed');
          exit(EXIT.failure);
        },
      );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGHUP', () => reload(gateway, log));
    if (process.env.npm_lifecycle_event) stopWhenParentExits(() => stop('npm exited'));
    // A bug on one request must not take every other connection down with it.
    process.on('uncaughtException', (err) => gateway.log.error({ err }, 'uncaught exception'));
    process.on('unhandledRejection', (err) => gateway.log.error({ err }, 'unhandled rejection'));
  });
}

function reportStartFailure(file: string, err: unknown): void {
  if (err instanceof ConfigLoadError) {
    for (const e of err.errors) console.error(String(e));
    console.error(`${file}: invalid configuration, not starting`);
  } else if (err instanceof StartupError) console.error(`tollgate: ${err.message}`);
  else console.error('tollgate: failed to start:', err);
}

/** The gateway logs the outcome (reloaded, or each error); only a refusal to reload is said here. */
function reload(gateway: Gateway, log: Logger): void {
  gateway.reload().catch((err) => log.error({ err }, `reload refused (${(err as Error).message}): keeping the current configuration`));
}

/**
 * `npm start` runs the gateway as npm's child and relays SIGINT and SIGTERM to it, but npm dies of
 * any other signal (SIGHUP, SIGKILL) and leaves its child running, holding the ports and the data
 * directory. Under npm, the gateway stops when its parent changes.
 */
function stopWhenParentExits(stop: () => void): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    stop();
  }, PARENT_CHECK_MS).unref();
}

/** Only our own: a gateway started later on the same data directory may have written its pid since. */
function removePidFile(pidFile: string): void {
  try {
    if (readFileSync(pidFile, 'utf8').trim() === String(process.pid)) rmSync(pidFile);
  } catch {
    // Already gone.
  }
}
