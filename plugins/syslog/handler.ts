/**
 * The runtime: each request's entry, Kong's serialized request as JSON, sent at the severity its response
 * class is configured with (5xx, 4xx, the rest), unless that is less severe than `log_level`. One logger
 * process per socket path in each gateway process; the facility and severity travel in each line's PRI.
 */
import { dirname, resolve } from 'node:path';
import { reconcileResources, type PluginApi, type PluginRuntime } from '../../src/pdk/index.ts';
import { FACILITIES, SEVERITIES, type SyslogConfig } from './schema.ts';
import { SyslogWriter } from './syslog-writer.ts';

type Severity = SyslogConfig['log_level'];

function severityFor(status: number, config: SyslogConfig): Severity {
  if (status >= 500) return config.server_errors_severity;
  if (status >= 400) return config.client_errors_severity;
  return config.successful_severity;
}

export function createRuntime(api: PluginApi): PluginRuntime<SyslogConfig> {
  const writers = new Map<string, SyslogWriter>();
  const lost = api.metrics.counter({
    name: 'tollgate_syslog_lost_lines_total',
    help: 'Log lines not handed to logger: too_large (over 64 KiB), backlog (too much waited for it), unavailable (it could not run)',
    labelNames: ['socket', 'reason'],
  });

  return {
    // Writers are kept by the path as configured (what the log phase is given), sending where it points.
    async configure(view) {
      const baseDir = dirname(view.config.file);
      const paths = new Map(view.instances.map((instance) => [instance.config.socket_path, resolve(baseDir, instance.config.socket_path)]));
      await reconcileResources(writers, paths, (_, socket) => new SyslogWriter(socket, api.log, (reason) => lost.inc({ socket, reason })));
    },

    log(ctx, config) {
      const entry = ctx.serialize();
      const severity = severityFor(entry.response.status, config);
      if (SEVERITIES[severity] > SEVERITIES[config.log_level]) return;
      const priority = FACILITIES[config.facility] * 8 + SEVERITIES[severity];
      writers.get(config.socket_path)?.send(`<${priority}>${JSON.stringify(entry)}`);
    },

    async close() {
      await Promise.all([...writers.values()].map((writer) => writer.close()));
    },
  };
}
