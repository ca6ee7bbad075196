/**
 * The runtime: one LogFile per path (instances naming the same file share it, as Kong's descriptors are
 * kept by path), fed in the log phase with Kong's serialized request as one JSON line. A relative path is
 * the configuration file's directory's, as `data_dir` is. SIGUSR1 reopens every file (the node's primary
 * passes it to its workers).
 */
import { dirname, resolve } from 'node:path';
import { reconcileResources, type PluginApi, type PluginRuntime } from '../../src/pdk/index.ts';
import { LogFile } from './log-file.ts';
import type { FileLogConfig } from './schema.ts';

export function createRuntime(api: PluginApi): PluginRuntime<FileLogConfig> {
  const files = new Map<string, LogFile>();
  const lost = api.metrics.counter({
    name: 'tollgate_file_log_lost_lines_total',
    help: 'Log lines not written: unwritable (the file could not be opened or written), backlog (too many waited for a slow disk)',
    labelNames: ['path', 'reason'],
  });
  const reopenAll = () => {
    for (const file of files.values()) file.reopen();
  };
  process.on('SIGUSR1', reopenAll);

  return {
    // Files are kept by the path as configured (what the log phase is given), opened where it points.
    async configure(view) {
      const baseDir = dirname(view.config.file);
      const paths = new Map(view.instances.map((instance) => [instance.config.path, resolve(baseDir, instance.config.path)]));
      await reconcileResources(files, paths, (_, where) => new LogFile(where, api.log, (reason, count) => lost.inc({ path: where, reason }, count)));
    },

    log(ctx, config) {
      files.get(config.path)?.write(JSON.stringify(ctx.serialize()), config.reopen);
    },

    async close() {
      process.off('SIGUSR1', reopenAll);
      await Promise.all([...files.values()].map((file) => file.close()));
    },
  };
}
