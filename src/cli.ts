/**
 * The command line: `start` runs the gateway, `check` validates a config, `migrate` and `store:copy`
 * manage the PostgreSQL store.
 *   tsx src/cli.ts start [--config FILE]     (or GATEWAY_CONFIG=FILE; default ./gateway.yaml)
 *   tsx src/cli.ts check [--config FILE]
 *   tsx src/cli.ts migrate [--config FILE]
 *   tsx src/cli.ts store:copy --from leveldb --to postgres [--config FILE]
 */
import { parseArgs } from 'node:util';
import { loadConfigFile } from './config/load.ts';
import { Gateway, startFailureLines } from './gateway.ts';
import { bundledPlugins } from './plugins.ts';
import { startNode } from './process/cluster.ts';
import { copyCommand } from './store/copy.ts';
import { migrateCommand } from './store/migrate.ts';

function configPath(args: string[]): string {
  const { values } = parseArgs({ args, options: { config: { type: 'string', short: 'c' } }, allowPositionals: false });
  return values.config ?? process.env.GATEWAY_CONFIG ?? 'gateway.yaml';
}

async function check(file: string): Promise<number> {
  const result = await loadConfigFile(file, bundledPlugins);
  if (result.ok) {
    console.log(`${file}: configuration is valid`);
    return 0;
  }
  for (const error of result.errors) console.error(String(error));
  return 1;
}

async function start(file: string): Promise<void> {
  // worker_processes above 1: a primary supervises the workers (and each worker comes back here).
  if (await startNode(file)) return;
  let gateway: Gateway;
  try {
    gateway = await Gateway.start(file);
  } catch (err) {
    for (const line of startFailureLines(err, file)) console.error(line);
    process.exit(1);
  }
  for (const line of gateway.listenerLines()) console.log(line);
  console.log(`pid ${process.pid}: SIGHUP reloads ${file}, SIGTERM stops`);
  const shutdown = (signal: string) => {
    gateway.log.info({ signal }, 'shutting down');
    gateway.stop().then(
      () => process.exit(0),
      (err) => {
        console.error('tollgate: shutdown failed:', err);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGHUP', () => {
    gateway.reload().then(
      (r) => console.log(r.ok ? 'configuration reloaded' : `configuration invalid (${r.errors.length} errors): keeping the current one`),
      (err) => {
        gateway.log.error({ err }, 'reload failed');
        console.error(`tollgate: reload refused (${(err as Error).message}): keeping the current configuration`);
      },
    );
  });
  // A bug on one request must not take every other connection down with it.
  process.on('uncaughtException', (err) => gateway.log.error({ err }, 'uncaught exception'));
  process.on('unhandledRejection', (err) => gateway.log.error({ err }, 'unhandled rejection'));
}

const [command = 'start', ...rest] = process.argv.slice(2);
if (command === 'check') process.exit(await check(configPath(rest)));
else if (command === 'start') await start(configPath(rest));
else if (command === 'migrate') process.exit(await migrateCommand(rest));
else if (command === 'store:copy') process.exit(await copyCommand(rest));
else {
  console.error(`usage: tollgate start|check|migrate [--config FILE] | store:copy --from leveldb --to postgres [--config FILE]`);
  process.exit(2);
}
