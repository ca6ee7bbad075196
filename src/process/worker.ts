/** The worker processes of a multi-process node (cluster.ts describes the node as a whole). */
import { Socket } from 'node:net';
import { EXIT } from '../cli/command.ts';
import { Gateway, startFailureExitCode, startFailureLines } from '../gateway.ts';
import { STORE_FD, type ToPrimary, type ToWorker } from './messages.ts';
import { WorkerExchange } from './worker-exchange.ts';
import { flushLogs } from '../log.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { RemoteStore } from '../store/ipc.ts';

/**
 * A worker: serves until the primary stops it (or goes away); resolves with its exit code. Started
 * by the command line the primary forked (`tollgate start` again), which hands it the plugins.
 */
export async function runWorker(configFile: string, plugins: PluginRegistry): Promise<number> {
  const number = Number(process.env.TOLLGATE_WORKER);
  let processes = { master: process.ppid, workers: [process.pid] };
  let gateway: Gateway | undefined;
  let failureExitCode: number = EXIT.failure;
  const exchange = new WorkerExchange();
  const store = process.env.TOLLGATE_STORE === 'ipc' ? new RemoteStore(new Socket({ fd: STORE_FD, readable: true, writable: true })) : undefined;
  const starting = Gateway.start(configFile, {
    registry: plugins,
    store,
    nodeId: process.env.TOLLGATE_NODE_ID || undefined,
    // The primary sweeps the embedded store; on PostgreSQL the first worker of each node does.
    sweep: !store && number === 1,
    processes: () => processes,
    exchange,
  }).then(
    (started) => (gateway = started),
    (err) => {
      for (const line of startFailureLines(err, configFile)) console.error(line);
      failureExitCode = startFailureExitCode(err);
      return undefined;
    },
  );
  let stopping = false;
  let stopped: (code: number) => void = () => {};
  const done = new Promise<number>((resolve) => (stopped = resolve));
  // An order that comes while the gateway is starting stops it once started: nothing else would close it.
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void starting
      .then((started) => started?.stop())
      .then(
        () => stopped(0),
        (err) => {
          console.error('tollgate: shutdown failed:', err);
          stopped(1);
        },
      );
  };
  process.on('message', (message: ToWorker) => {
    if (message.type === 'pids') processes = { master: message.master, workers: message.workers };
    else if (message.type === 'stop') stop();
    else if (message.type === 'reload') void reloadWorker(gateway);
    else exchange.received(message);
  });
  // The primary coordinates these for the whole node (see the top of cluster.ts). Without a primary, a
  // SIGTERM still stops this worker gracefully.
  process.on('SIGHUP', () => {});
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => (process.connected ? process.send!({ type: 'retire' } satisfies ToPrimary) : stop()));
  // The primary is gone (killed): nothing supervises this worker any more, and Node's cluster module
  // ends it at once (its own 'disconnect' listener exits the process), so no graceful stop can run; the
  // line says why the worker went.
  process.prependOnceListener('disconnect', () => {
    if (stopping) return;
    gateway?.log.error({ primary: processes.master }, "the node's primary process is gone: this worker exits");
    flushLogs();
  });

  const started = await starting;
  if (!started) return failureExitCode;
  if (stopping) return done;
  process.on('uncaughtException', (err) => started.log.error({ err }, 'uncaught exception'));
  process.on('unhandledRejection', (err) => started.log.error({ err }, 'unhandled rejection'));
  process.send!({ type: 'listening', lines: started.listenerLines() } satisfies ToPrimary);
  return done;
}

async function reloadWorker(gateway: Gateway | undefined): Promise<void> {
  if (!gateway) return;
  let answer: ToPrimary;
  try {
    const result = await gateway.reload();
    answer = { type: 'reloaded', ok: result.ok, errors: result.ok ? 0 : result.errors.length };
  } catch (err) {
    gateway.log.error({ err }, 'reload failed');
    answer = { type: 'reloaded', ok: false, errors: 0, refused: (err as Error).message };
  }
  process.send!(answer);
}
