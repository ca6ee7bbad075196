/**
 * Kong's file-log (spec/03-plugins/04-file-log/01-log_spec.lua, 02-schema_spec.lua) with real files: one
 * JSON line per request as Kong's serializer object (with values other plugins set), rotation by rename
 * followed by SIGUSR1 (a node of two workers, through its primary) or by `reopen: true`, and the files
 * that cannot be written (missing directory, a directory) losing their lines without failing a request.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startGateway, startUpstream, tempDir, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const linesOf = (file: string): any[] =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];

const uris = (file: string) => linesOf(file).map((entry) => entry.request.uri);

describe('file-log', () => {
  const dir = tempDir('tollgate-file-log-');
  const files = { plain: join(dir, 'plain.log'), reopened: join(dir, 'reopened.log'), missing: join(dir, 'no-such-dir', 'x.log'), directory: join(dir, 'a-directory') };
  mkdirSync(files.directory);
  let upstream: Upstream;
  let gw: TestGateway;

  before(async () => {
    upstream = await startUpstream();
    const route = (name: string, config: Record<string, unknown>, plugins: Record<string, unknown>[] = []) => ({
      name, paths: [`/${name}`], plugins: [{ name: 'file-log', config }, ...plugins],
    });
    gw = await startGateway({
      services: [
        {
          name: 'echo', url: upstream.url,
          routes: [
            route('plain', { path: files.plain }, [{ name: 'correlation-id', config: { header_name: 'x-correlation', generator: 'uuid' } }]),
            route('reopened', { path: files.reopened, reopen: true }),
            route('missing', { path: files.missing }),
            route('directory', { path: files.directory }),
          ],
        },
      ],
    });
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  test("one JSON line per request: Kong's serializer object, with the values other plugins set", async () => {
    const res = await request(`${gw.http}/plain/one?x=1`, { headers: { authorization: 'Basic Zm9vOmJhcg==' } });
    assert.equal(res.status, 200);
    const [entry] = await waitFor(() => linesOf(files.plain).length >= 1 && linesOf(files.plain), 'the line');
    assert.equal(entry.request.uri, '/plain/one?x=1');
    assert.equal(entry.request.method, 'GET');
    assert.equal(entry.request.headers.authorization, 'REDACTED');
    assert.equal(entry.response.status, 200);
    assert.equal(entry.upstream_uri, '/one?x=1', 'the route strips its path');
    assert.equal(entry.route.name, 'plain');
    assert.equal(entry.client_ip, '127.0.0.1');
    // correlation-id's kong.log.set_serialize_value.
    assert.equal(entry.correlation_id, res.json().headers['x-correlation']);
  });

  test('with reopen, a file renamed away is created again by the next request', async () => {
    await request(`${gw.http}/reopened/1`);
    await waitFor(() => uris(files.reopened).includes('/reopened/1'), 'the first line');
    renameSync(files.reopened, files.reopened + '.1');
    await request(`${gw.http}/reopened/2`);
    await waitFor(() => uris(files.reopened).includes('/reopened/2'), 'the line in a new file');
    assert.deepEqual(uris(files.reopened + '.1'), ['/reopened/1']);
  });

  test('a file in a missing directory, or a directory, is not written, and the request is served', async () => {
    assert.equal((await request(`${gw.http}/missing`)).status, 200);
    assert.equal((await request(`${gw.http}/directory`)).status, 200);
    await waitFor(async () => {
      const metrics = (await request(`${gw.admin}/metrics`)).text;
      return metrics.includes(`tollgate_file_log_lost_lines_total{path="${files.missing}",reason="unwritable"} 1`) &&
        metrics.includes(`tollgate_file_log_lost_lines_total{path="${files.directory}",reason="unwritable"} 1`);
    }, 'both lines counted as lost');
    assert.equal(existsSync(join(dir, 'no-such-dir')), false, 'no directory is created');
  });
});

test('rotation: lines go to the renamed file until SIGUSR1, then to a new one (a node of two workers)', async () => {
  const dir = tempDir('tollgate-file-log-');
  const file = join(dir, 'access.log');
  const upstream = await startUpstream();
  const node = await spawnGateway({
    gateway: { worker_processes: 2, log_level: 'error' },
    services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'r', paths: ['/'] }] }],
    plugins: [{ name: 'file-log', config: { path: file } }],
  });
  try {
    for (const n of [1, 2, 3, 4]) await request(`${node.http}/before/${n}`);
    await waitFor(() => uris(file).length === 4, 'four lines');
    renameSync(file, file + '.1');
    for (const n of [1, 2, 3, 4]) await request(`${node.http}/renamed/${n}`);
    await waitFor(() => uris(file + '.1').length === 8, 'the renamed file still written');
    assert.equal(existsSync(file), false);
    node.kill('SIGUSR1');
    // Each worker reopens before its next write: every request goes on until both wrote to the new file.
    await waitFor(async () => {
      await request(`${node.http}/after`);
      return uris(file).length >= 4;
    }, 'lines in a new file');
    assert.ok(uris(file).every((uri) => uri === '/after'));
    assert.deepEqual(uris(file + '.1').slice(0, 8).sort(), ['/before/1', '/before/2', '/before/3', '/before/4', '/renamed/1', '/renamed/2', '/renamed/3', '/renamed/4']);
  } finally {
    node.kill('SIGTERM');
    await node.exited;
    await upstream.close();
  }
});

describe('file-log config (02-schema_spec.lua)', () => {
  test("Kong's path pattern and messages; Lua refused", async () => {
    assert.deepEqual(await pluginConfigErrors('file-log', { reopen: true }), ['config.path: required field missing']);
    for (const path of ['/ovo*', '/ovo`', 'test&thing', 'test%thing', 'test\\thing', ' /ovo', '/ovo ']) {
      assert.deepEqual(await pluginConfigErrors('file-log', { path }), ['config.path: not a valid filename'], path);
    }
    assert.deepEqual(await pluginConfigErrors('file-log', { path: '/tmp/with space/ok.log', custom_fields_by_lua: null }), []);
    const [lua] = await pluginConfigErrors('file-log', { path: '/tmp/x.log', custom_fields_by_lua: { foo: "return 'bar'" } });
    assert.match(lua, /^config\.custom_fields_by_lua: Tollgate does not run Lua/);
  });
});
