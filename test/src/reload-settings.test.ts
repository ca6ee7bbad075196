/** SIGHUP applies the log settings at once; settings bound to listeners are reported as needing a restart. */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { request, spawnGateway, startUpstream } from '../helpers/gateway.ts';
import { waitFor } from '../helpers/support.ts';

test('SIGHUP: a new log_level applies at once; a new max_header_size is reported as needing a restart', async (t) => {
  const upstream = await startUpstream();
  t.after(() => upstream.close());
  const services = [{ name: 'echo', url: upstream.url, routes: [{ name: 'echo', paths: ['/echo'] }] }];
  const gateway = { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'warn' };
  const gw = await spawnGateway({ gateway, services });
  t.after(() => gw.kill('SIGKILL'));
  const accessLines = () => gw.output().split('\n').filter((l) => l.includes('"type":"access"')).length;

  assert.equal((await request(gw.http + '/echo/a')).status, 200);
  // The access log is written at info level: nothing at warn.
  const rewrite = (settings: Record<string, unknown>) =>
    writeFileSync(gw.configFile, stringify({ _format_version: '3.0', services, gateway: { ...gateway, data_dir: gw.dataDir, ...settings } }));
  rewrite({ log_level: 'info', max_header_size: 16384 });
  gw.kill('SIGHUP');
  // A node of workers has reloaded when every worker has (the primary says so); one process says so itself.
  const reloaded = () => {
    const out = gw.output();
    return out.includes('"process":"primary"') ? out.includes('configuration reloaded on every worker') : out.includes('configuration reloaded');
  };
  await waitFor(reloaded, 'the reload');

  assert.equal(accessLines(), 0, 'no access line was logged at warn');
  assert.equal((await request(gw.http + '/echo/b')).status, 200);
  gw.kill('SIGTERM'); // flushes the asynchronous log
  assert.equal(await gw.exited, 0);
  assert.equal(accessLines(), 1, 'after the reload to info, the request is logged');
  assert.match(gw.output(), /"settings":\["max_header_size"\].*next restart/);
});
