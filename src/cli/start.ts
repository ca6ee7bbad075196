/**
 * `tollgate start`: runs the gateway until SIGTERM or SIGINT; SIGHUP reloads the configuration. The
 * pid goes to a file (by default in the data directory, which only this gateway may use), so scripts
 * signal this gateway and no other one on the machine.
 */
import { Gateway, startFailureExitCode, startFailureLines } from '../gateway.ts';
import { createLogger, type Logger } from '../log.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { startNode } from '../process/cluster.ts';
import { PID_FILE_NAME, removePidFile, writePidFile } from '../process/pid-file.ts';
import { stopOnSignals } from '../process/stop-signals.ts';
import { EXIT, type CommandDefinition } from './command.ts';
import { CONFIG_OPTION, configFileOf } from './config-option.ts';

export const start: CommandDefinition = {
  name: 'start',
  summary: 'run the gateway',
  details: [
    'Prints one line per listener, then serves. SIGTERM or SIGINT: finish in-flight requests, flush, exit 0',
    '(a repeated signal changes nothing: the stop already under way loses nothing answered).',
    'SIGHUP: re-read the configuration file (an invalid one is logged and ignored).',
    'With worker_processes above 1, this process supervises the workers, and signals act on all of them',
    '(a SIGTERM to one worker alone makes the supervisor replace it, gracefully).',
    `The pid is written to --pid-file, by default ${PID_FILE_NAME} in the data directory.`,
  ].join('\n'),
  options: {
    config: CONFIG_OPTION,
    'pid-file': { type: 'string', value: 'FILE', description: `where to write the pid (default: <data_dir>/${PID_FILE_NAME})` },
  },
  run: (options, plugins) => runGateway(configFileOf(options), plugins, options['pid-file'] as string | undefined),
};

async function runGateway(file: string, plugins: PluginRegistry, pidFileOption: string | undefined): Promise<number> {
  // worker_processes above 1: the primary (or a worker) runs until the node stops, and exits itself.
  const node = await startNode(file, plugins, pidFileOption);
  if (node !== undefined) return node;
  let gateway: Gateway;
  try {
    gateway = await Gateway.start(file, { registry: plugins });
  } catch (err) {
    for (const line of startFailureLines(err, file)) console.error(line);
    return startFailureExitCode(err);
  }
  const log = createLogger('info');
  let pidFile: string;
  try {
    pidFile = writePidFile(pidFileOption, gateway.config.gateway.data_dir);
  } catch (err) {
    console.error(`tollgate: ${(err as Error).message}`);
    await gateway.stop();
    return EXIT.failure;
  }
  if (gateway.config.oneProcessBecause) log.info({ worker_processes: 1 }, gateway.config.oneProcessBecause);
  for (const l of gateway.proxyListeners) log.info({ url: l.url, listen: l.spec.text }, `proxy listening on ${l.url} (${l.spec.text})`);
  for (const l of gateway.adminListeners) log.info({ url: l.url, listen: l.spec.text }, `admin listening on ${l.url} (${l.spec.text})`);
  log.info({ config: file, pid_file: pidFile }, `started, pid ${process.pid} (in ${pidFile}): SIGHUP reloads ${file}, SIGTERM stops`);
  return new Promise((exit) => {
    const stop = (reason: string) => {
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
    stopOnSignals(stop, log);
    process.on('SIGHUP', () => reload(gateway, log));
    // A bug on one request must not take every other connection down with it.
    process.on('uncaughtException', (err) => gateway.log.error({ err }, 'uncaught exception'));
    process.on('unhandledRejection', (err) => gateway.log.error({ err }, 'unhandled rejection'));
  });
}

/** The gateway logs the outcome (reloaded, or each error); only a refusal to reload is said here. */
function reload(gateway: Gateway, log: Logger): void {
  gateway.reload().catch((err) => log.error({ err }, `reload refused (${(err as Error).message}): keeping the current configuration`));
}
