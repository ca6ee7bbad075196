/**
 * No operator regex takes super-linear time on a client's text (issue 28, item 2). Each pattern here
 * passed the old check and pinned the event loop on a short request: `(\w|\d)+$` (2–3 s on a 34-byte
 * path, doubling every two characters), overlapping alternation `(a|aa)+` and `(a|a?)+`, the polynomial
 * `(.*)/(.*)/(.*)/items$` (1.3 s on 1.2 KB, cubic) — as route paths, as a `~*` header value, as a CORS
 * origin. The gateway runs as a child process, so that a pinned gateway fails these tests (by their
 * timeout) instead of stopping the runner; each attack must leave another request answered and itself be
 * answered. Also: what the engine cannot run (backreferences, lookaround) is refused by `check` as a
 * FILE:LINE:COL error with the position in the pattern; what worked keeps matching with its captures.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startUpstream, tempDir, tollgateArgs, type Reply, type SpawnedGateway, type Upstream } from '../../helpers/gateway.ts';

/** 64 characters and one that makes the match fail: exponential for a backtracking engine. */
const OVERLAPPING = 'a'.repeat(64) + '!';
const DIGITS = '1'.repeat(64) + '!';
/** 24 KB of segments and no `/items` at the end: cubic for a backtracking engine. */
const SEGMENTS = 'a/'.repeat(12_000);

describe('operator regexes run in linear time on client input', { timeout: 120_000 }, () => {
  let upstream: Upstream;
  let gw: SpawnedGateway;
  before(async () => {
    upstream = await startUpstream();
    gw = await spawnGateway({
      services: [
        {
          name: 'echo',
          url: upstream.url,
          routes: [
            { name: 'files', paths: ['~/files/(\\w|\\d)+$'] },
            { name: 'overlap', paths: ['~/overlap/(a|aa)+$', '~/optional/(a|a?)+$'] },
            { name: 'segments', paths: ['~/v1/(?<first>.*)/(.*)/(.*)/items$'] },
            { name: 'tagged', paths: ['/tagged'], headers: { 'x-tag': ['~*^(a|aa)+$'] } },
            { name: 'cors', paths: ['/cors'], plugins: [{ name: 'cors', config: { origins: ['http://(a|aa)+\\.example\\.test'] } }] },
            { name: 'alive', paths: ['/alive'] },
          ],
        },
      ],
    });
  });
  after(async () => {
    gw?.kill('SIGKILL');
    await upstream?.close();
  });

  /** Sends `attack`, then another request, which must be answered; returns the attack's answer. */
  async function attackWhileServing(path: string, headers: Record<string, string> = {}): Promise<Reply> {
    const attacked = request(`${gw.http}${path}`, { headers });
    const alive = await request(`${gw.http}/alive`);
    assert.equal(alive.status, 200, 'another request is answered meanwhile');
    return attacked;
  }

  const routeOf = (reply: Reply) => JSON.parse(reply.text).headers?.['x-forwarded-prefix'];

  test('route paths: (\\w|\\d)+$, (a|aa)+$ and (a|a?)+$ on a path that almost matches', async () => {
    for (const path of [`/files/${DIGITS}`, `/overlap/${OVERLAPPING}`, `/optional/${OVERLAPPING}`]) {
      assert.equal((await attackWhileServing(path)).status, 404, path.slice(0, 12));
    }
    assert.equal((await request(`${gw.http}/files/report2026`)).status, 200);
    assert.equal((await request(`${gw.http}/overlap/aaa`)).status, 200);
  });

  test('route paths: the polynomial (.*)/(.*)/(.*)/items$ on a long path', async () => {
    assert.equal((await attackWhileServing(`/v1/${SEGMENTS}`)).status, 404);
    const matched = await request(`${gw.http}/v1/a/b/c/items`);
    assert.equal(matched.status, 200);
    assert.equal(routeOf(matched), '/v1/a/b/c/items', 'the whole match is the stripped prefix, as before');
  });

  test('a ~* header value regex', async () => {
    assert.equal((await attackWhileServing('/tagged', { 'x-tag': OVERLAPPING })).status, 404);
    assert.equal((await request(`${gw.http}/tagged`, { headers: { 'x-tag': 'AAAA' } })).status, 200, 'case-insensitive, as before');
  });

  test('a CORS origin regex', async () => {
    const attacked = await attackWhileServing('/cors', { origin: `http://${OVERLAPPING}.example.test` });
    assert.equal(attacked.status, 200);
    assert.equal(attacked.headers['access-control-allow-origin'], undefined);
    const allowed = await request(`${gw.http}/cors`, { headers: { origin: 'http://aaa.example.test' } });
    assert.equal(allowed.headers['access-control-allow-origin'], 'http://aaa.example.test');
  });
});

/** `tollgate check` on a file: its exit code and stderr. */
function check(lines: string[]): Promise<{ code: number | null; stderr: string; file: string }> {
  const file = join(tempDir(), 'gateway.yaml');
  writeFileSync(file, lines.join('\n') + '\n');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, tollgateArgs('check', '--config', file), { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stderr, file }));
  });
}

test('check refuses what the linear-time engine cannot run, as FILE:LINE:COL with the position in the pattern', async () => {
  const { code, stderr, file } = await check([
    '_format_version: "3.0"', //                                      1
    'services:', //                                                   2
    '  - name: s', //                                                 3
    '    url: http://127.0.0.1:9', //                                 4
    '    routes:', //                                                 5
    "      - paths: ['~/(?<user>\\w+)/\\1', '~/v1/(?!admin)']", //     6
    "        headers: { x-a: ['~*^(?<=a)b'] }", //                    7
    'plugins:', //                                                    8
    "  - { name: cors, config: { origins: ['(a)(?=b)'] } }", //      9
  ]);
  assert.equal(code, 1, stderr);
  assert.deepEqual(stderr.trim().split('\n'), [
    `${file}:6:17: services[0].routes[0].paths[0]: invalid regex: '/(?<user>\\w+)/\\1' (a backreference is not supported by the linear-time engine (RE2), at position 14)`,
    `${file}:6:38: services[0].routes[0].paths[1]: invalid regex: '/v1/(?!admin)' (a negative lookahead is not supported by the linear-time engine (RE2), at position 4)`,
    `${file}:7:26: services[0].routes[0].headers.x-a[0]: invalid regex: '^(?<=a)b' (a lookbehind is not supported by the linear-time engine (RE2), at position 1)`,
    `${file}:9:39: plugins[0].config.origins[0]: '(a)(?=b)' is not a valid regex (a lookahead is not supported by the linear-time engine (RE2), at position 3)`,
  ]);
});
