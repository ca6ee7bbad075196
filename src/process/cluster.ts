/**
 * A node of several processes (`worker_processes` above 1), on Node's cluster module; each worker is
 * a whole gateway. Workers accept connections from the shared listening sockets themselves, as nginx
 * workers do (SCHED_NONE), rather than the primary accepting and handing each connection over
 * (round-robin): a worker that dies cannot strand a connection handed to it (Node never closes a
 * handed-over connection whose worker died before taking it; the client would wait for ever), and
 * the primary stays off the data path.
 *
 * The primary supervises: a worker that dies is replaced (with a growing delay if it keeps dying at
 * start) while the others go on serving; SIGHUP reloads every worker, SIGTERM/SIGINT (once or more:
 * stop-signals.ts) stops every worker gracefully and then the primary, which exits 0. Workers stop
 * only on the primary's order: a Ctrl-C, and systemd's KillMode=control-group, signal every process
 * of the node at once, and a worker stopping on its own meanwhile would race the primary's stop. So a
 * worker ignores SIGHUP and SIGINT, and passes a SIGTERM of its own to the primary, which stops it
 * gracefully (its answered requests' events written) and starts another unless the node is stopping.
 *
 * The store: with LevelDB the primary owns the database (one process may open it) and serves it to
 * each worker over a private socket pair (store/ipc.ts); with PostgreSQL every worker is a client.
 */
import cluster from 'node:cluster';
import { workerCount } from '../config/entities.ts';
import { loadConfigFile } from '../config/load.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { Primary } from './primary.ts';
import { runWorker } from './worker.ts';

/**
 * Runs this process's part of a multi-process node and resolves with its exit code once the node has
 * stopped; undefined at once when the node is a single process (worker_processes 1, or a config the
 * single-process path will report as invalid).
 */
export async function startNode(configFile: string, plugins: PluginRegistry, pidFileOption?: string): Promise<number | undefined> {
  if (cluster.isWorker) return runWorker(configFile, plugins);
  const loaded = await loadConfigFile(configFile, plugins);
  if (!loaded.ok) return undefined;
  const count = workerCount(loaded.config.gateway.worker_processes);
  if (count <= 1) return undefined;
  return new Primary(configFile, loaded.config, plugins, count, pidFileOption).run();
}
