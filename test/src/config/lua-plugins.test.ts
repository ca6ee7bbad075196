/**
 * Kong's `pre-function` and `post-function` run Lua, which Tollgate does not: a file naming them, as real
 * kong.yml files do, is refused by `tollgate check` and at startup with one line per instance that names
 * the plugin and what to use instead; so is the `plugins` setting naming one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runTollgate, tempDir, writeConfig } from '../../helpers/gateway.ts';

const USE_INSTEAD = 'runs Lua code, which Tollgate does not execute; use request-transformer or response-transformer, or write the logic as a TypeScript plugin (docs/plugin-development.md)';

/** A kong.yml in the shape public ones use these plugins: Lua chunks per phase, on a route and globally. */
function luaConfig(): string {
  return writeConfig(
    {
      services: [
        {
          name: 'api',
          url: 'http://127.0.0.1:9',
          routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'pre-function', config: { access: ["kong.service.request.set_header('x-from', 'lua')"] } }] }],
        },
      ],
      plugins: [{ name: 'post-function', config: { header_filter: ["kong.response.set_header('x-served-by', 'lua')"] } }],
    },
    tempDir(),
  );
}

test('tollgate check refuses pre-function and post-function, each with what to use instead', async () => {
  const file = luaConfig();
  const { code, output } = await runTollgate(['check', '--config', file]);
  assert.equal(code, 1);
  const lines = output.trim().split('\n').filter((line) => line.includes('Lua'));
  assert.deepEqual(lines.map((line) => line.replace(/^.*?:\d+:\d+: /, '')).sort(), [
    `plugins[0].name: plugin 'post-function' ${USE_INSTEAD}`,
    `services[0].routes[0].plugins[0].name: plugin 'pre-function' ${USE_INSTEAD}`,
  ]);
  assert.ok(lines.every((line) => line.startsWith(`${file}:`)), 'each line gives the file, line and column');
});

test('the gateway does not start on such a file, and says why', async () => {
  const { code, output } = await runTollgate(['start', '--config', luaConfig()]);
  assert.equal(code, 1);
  assert.match(output, new RegExp(`plugin 'pre-function' ${USE_INSTEAD.replace(/[().]/g, '\\$&')}`));
});

test("the 'plugins' setting naming one is refused the same way", async () => {
  const file = writeConfig({ gateway: { plugins: ['bundled', 'pre-function'] } }, tempDir());
  const { code, output } = await runTollgate(['check', '--config', file]);
  assert.equal(code, 1);
  assert.match(output, /gateway\.plugins\[1\]: plugin 'pre-function' runs Lua code, which Tollgate does not execute/);
});
