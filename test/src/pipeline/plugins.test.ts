/**
 * The plugin pipeline with a test-only registry: Kong's scoping and precedence (global, service, route,
 * consumer and their combinations), the lazy consumer lookup, priority order and ties, the response and
 * log phases, plugins answering on routes without a service, errors thrown by plugins, body rewriting,
 * response bodies observed as they pass (an observer that throws is dropped, the body goes on whole),
 * plugin config validation, admin routes, configure() on reload, and prepare() with its compile errors.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ConfigLoadError } from '../../../src/errors.ts';
import { Gateway } from '../../../src/gateway.ts';
import { ConfigCompileError, HttpError, type AccessContext, type PluginDefinition } from '../../../src/pdk/index.ts';
import { request, startUpstream, tempDir, type Upstream } from '../../helpers/gateway.ts';
import { startWithRegistry, waitFor, type RegistryGateway } from '../../helpers/support.ts';

const logged: string[] = [];
const configuredInstances: number[] = [];

/** Appends the plugin's name to the upstream `x-order` header, so the test sees which ran and in which order. */
function recordOrder(ctx: AccessContext, name: string): void {
  const order = ((ctx.shared.order as string[] | undefined) ??= []);
  order.push(name);
  ctx.setUpstreamHeader('x-order', order.join(','));
}

const valueSchema = { type: 'record' as const, fields: { value: { type: 'string' as const, required: true } } };

function recorder(name: string, priority: number, header?: string): PluginDefinition<{ value: string }> {
  return {
    name,
    version: '1.0.0',
    priority,
    configSchema: valueSchema,
    create: () => ({
      access(ctx, config) {
        recordOrder(ctx, name);
        if (header) ctx.setUpstreamHeader(header, config.value);
      },
    }),
  };
}

const tag: PluginDefinition<{ value: string }> = {
  name: 'tag',
  version: '1.0.0',
  priority: 1000,
  configSchema: valueSchema,
  create: () => ({
    configure(view) {
      configuredInstances.push(view.instances.length);
    },
    access(ctx, config) {
      recordOrder(ctx, 'tag');
      ctx.setUpstreamHeader('x-tag', config.value);
      ctx.setUpstreamHeader('x-server-port', String(ctx.serverPort));
    },
    response(ctx, config, response) {
      response.headers['x-tag-seen'] = config.value;
      response.headers['x-server'] = `${ctx.serverAddress} ${ctx.serverPort}`;
    },
    log(ctx) {
      logged.push(`${ctx.route.name}:${(ctx as unknown as { status: number }).status}`);
    },
    adminRoutes: [{ method: 'GET', path: '/tag-info/:what', handler: (req) => ({ status: 200, body: { what: req.params.what } }) }],
  }),
};

const auth: PluginDefinition<Record<string, never>> = {
  name: 'auth',
  version: '1.0.0',
  priority: 2000,
  noConsumer: true,
  configSchema: { type: 'record', fields: {} },
  create: (api) => ({
    access(ctx) {
      recordOrder(ctx, 'auth');
      const who = ctx.headers['x-consumer'];
      if (typeof who !== 'string') return;
      const consumer = api.consumers.byUsername(who);
      if (!consumer) throw new HttpError(401, 'unknown consumer');
      ctx.consumer = consumer;
    },
  }),
};

const terminator: PluginDefinition<{ status: number; body: string }> = {
  name: 'terminator',
  version: '1.0.0',
  priority: 50,
  configSchema: { type: 'record', fields: { status: { type: 'integer', default: 200 }, body: { type: 'string', default: 'answered here' } } },
  create: () => ({
    access(ctx, config) {
      ctx.respond(config.status, { message: config.body, order: ctx.shared.order });
    },
  }),
};

const boom: PluginDefinition<{ mode: string }> = {
  name: 'boom',
  version: '1.0.0',
  priority: 40,
  configSchema: { type: 'record', fields: { mode: { type: 'string', one_of: ['throw', 'http', 'async'], required: true } } },
  create: () => ({
    async access(_ctx, config) {
      if (config.mode === 'http') throw new HttpError(403, 'nope', { 'x-why': 'test' });
      if (config.mode === 'async') await Promise.reject(new Error('async failure'));
      throw new Error('plugin bug');
    },
  }),
};

const shout: PluginDefinition<Record<string, never>> = {
  name: 'shout',
  version: '1.0.0',
  priority: 30,
  configSchema: { type: 'record', fields: {} },
  create: () => ({
    async access(ctx) {
      const body = await ctx.readBody();
      ctx.setUpstreamBody(Buffer.from(body.toString('utf8').toUpperCase()));
    },
  }),
};

/** What `watch` saw of each response body, and what the log phase says was sent. */
const watched: { seen: number; sent: number; status: number | undefined }[] = [];

const watch: PluginDefinition<Record<string, never>> = {
  name: 'watch',
  version: '1.0.0',
  priority: 20,
  configSchema: { type: 'record', fields: {} },
  create: () => ({
    response(ctx, _config, response) {
      const counts = { seen: 0, sent: 0, status: undefined as number | undefined };
      ctx.shared.watch = counts;
      response.observeBody?.(() => {
        throw new Error('observer bug');
      });
      response.observeBody?.((chunk) => (counts.seen += chunk.length));
    },
    log(ctx) {
      const counts = ctx.shared.watch as (typeof watched)[number] | undefined;
      if (!counts) return;
      counts.sent = ctx.outcome.responseBytes;
      counts.status = ctx.outcome.upstreamStatus;
      watched.push(counts);
    },
  }),
};

const registry = new Map<string, PluginDefinition>(
  [tag, auth, terminator, boom, shout, watch, recorder('early', 3000, 'x-early'), recorder('tie-a', 100), recorder('tie-b', 100)].map((p) => [p.name, p as PluginDefinition]),
);

let echo: Upstream;
let gw: RegistryGateway;

function config(globalTag = 'global'): Record<string, any> {
  return {
    services: [
      {
        name: 's1',
        url: echo.url,
        routes: [
          { name: 'rA', paths: ['/a'], plugins: [{ name: 'tag', config: { value: 'route' } }] },
          { name: 'rB', paths: ['/b'] },
          { name: 'rC', paths: ['/c'] },
          { name: 'boom-throw', paths: ['/boom/throw'], plugins: [{ name: 'boom', config: { mode: 'throw' } }] },
          { name: 'boom-http', paths: ['/boom/http'], plugins: [{ name: 'boom', config: { mode: 'http' } }] },
          { name: 'boom-async', paths: ['/boom/async'], plugins: [{ name: 'boom', config: { mode: 'async' } }] },
          { name: 'shout', paths: ['/shout'], plugins: [{ name: 'shout' }] },
          { name: 'watched', paths: ['/watched'], plugins: [{ name: 'watch' }] },
        ],
        plugins: [{ name: 'tag', config: { value: 'service' } }],
      },
      { name: 's2', url: echo.url, routes: [{ name: 'rD', paths: ['/d'] }] },
    ],
    routes: [
      { name: 'answered', paths: ['/answered'], plugins: [{ name: 'terminator', config: { status: 201 } }] },
      { name: 'unanswered', paths: ['/unanswered'] },
    ],
    consumers: [
      { username: 'alice', plugins: [{ name: 'tag', config: { value: 'consumer' } }, { name: 'early', config: { value: 'early-alice' } }] },
      { username: 'bob' },
      { username: 'carol' },
    ],
    plugins: [
      { name: 'tag', config: { value: globalTag } },
      { name: 'auth' },
      { name: 'early', config: { value: 'early-global' } },
      { name: 'tie-a', config: { value: 'a' } },
      { name: 'tie-b', config: { value: 'b' } },
      { name: 'tag', route: 'rB', service: 's1', config: { value: 'route+service' } },
      { name: 'tag', route: 'rA', consumer: 'bob', config: { value: 'route+consumer' } },
      { name: 'tag', service: 's1', consumer: 'carol', config: { value: 'service+consumer' } },
      { name: 'tag', route: 'rB', service: 's1', consumer: 'carol', config: { value: 'route+service+consumer' } },
    ],
  };
}

before(async () => {
  echo = await startUpstream();
  gw = await startWithRegistry(config(), registry);
});

after(async () => {
  await gw?.stop();
  await echo?.close();
});

async function tagFor(path: string, consumer?: string): Promise<string> {
  const reply = await request(gw.http + path, { headers: consumer ? { 'x-consumer': consumer } : {} });
  assert.equal(reply.status, 200, reply.text);
  return reply.json().headers['x-tag'];
}

test("one config per plugin, chosen by Kong's precedence", async () => {
  const cases: [string, string | undefined, string][] = [
    ['/a', undefined, 'route'],
    ['/b', undefined, 'route+service'],
    ['/c', undefined, 'service'],
    ['/d', undefined, 'global'],
    ['/d', 'alice', 'consumer'],
    ['/a', 'alice', 'consumer'],
    ['/a', 'bob', 'route+consumer'],
    ['/c', 'carol', 'service+consumer'],
    ['/a', 'carol', 'service+consumer'],
    ['/b', 'carol', 'route+service+consumer'],
    ['/b', 'bob', 'route+service'],
    ['/d', 'carol', 'global'],
  ];
  for (const [path, consumer, expected] of cases) assert.equal(await tagFor(path, consumer), expected, `${path} as ${consumer ?? 'anonymous'}`);
});

test('plugins run by descending priority, ties by name descending; consumer configs only apply after the consumer is known', async () => {
  const reply = await request(`${gw.http}/d`, { headers: { 'x-consumer': 'alice' } });
  const h = reply.json().headers;
  assert.equal(h['x-order'], 'early,auth,tag,tie-b,tie-a');
  assert.equal(h['x-early'], 'early-global', 'early runs before auth identified alice');
  assert.equal(h['x-tag'], 'consumer');
});

test('a plugin error answers the request: HttpError with its status, anything else 500', async () => {
  const http = await request(`${gw.http}/boom/http`);
  assert.equal(http.status, 403);
  assert.equal(http.json().message, 'nope');
  assert.equal(http.headers['x-why'], 'test');
  for (const path of ['/boom/throw', '/boom/async']) {
    const bug = await request(gw.http + path);
    assert.equal(bug.status, 500, path);
    assert.equal(bug.json().message, 'An unexpected error occurred');
  }
  const unknown = await request(`${gw.http}/d`, { headers: { 'x-consumer': 'mallory' } });
  assert.equal(unknown.status, 401);
  assert.equal((await request(`${gw.http}/d`)).status, 200, 'the gateway serves on');
});

test('a route without a service: a plugin may answer it; otherwise 503', async () => {
  const answered = await request(`${gw.http}/answered`);
  assert.equal(answered.status, 201);
  assert.deepEqual(answered.json(), { message: 'answered here', order: ['early', 'auth', 'tag', 'tie-b', 'tie-a'] });
  const unanswered = await request(`${gw.http}/unanswered`);
  assert.equal(unanswered.status, 503);
  assert.equal(unanswered.json().message, 'no Service found with those values');
});

test('the response phase edits downstream headers; the log phase runs once per request', async () => {
  const before = logged.length;
  const reply = await request(`${gw.http}/c`);
  assert.equal(reply.headers['x-tag-seen'], 'service');
  await waitFor(() => logged.length > before, 'the log phase');
  assert.deepEqual(logged.slice(before), ['rC:200']);
  await request(`${gw.http}/answered`);
  await waitFor(() => logged.length > before + 1, 'the log phase of an answered request');
  assert.deepEqual(logged.slice(before), ['rC:200', 'answered:201']);
});

test('plugins see the local address and port the request came on, in every phase', async () => {
  const { hostname, port } = new URL(gw.http);
  const reply = await request(`${gw.http}/c`);
  assert.equal(reply.json().headers['x-server-port'], port);
  assert.equal(reply.headers['x-server'], `${hostname} ${port}`);
});

test('a plugin can read the request body and replace what goes upstream', async () => {
  const reply = await request(`${gw.http}/shout`, { method: 'POST', body: 'hello there', headers: { 'content-type': 'text/plain' } });
  assert.equal(reply.status, 200);
  const seen = reply.json();
  assert.equal(seen.body, 'HELLO THERE');
  assert.equal(seen.headers['content-length'], '11');
});

test("plugins' admin routes are served on the admin listener", async () => {
  const reply = await request(`${gw.admin}/tag-info/here`);
  assert.equal(reply.status, 200);
  assert.deepEqual(reply.json(), { what: 'here' });
});

test('a reload configures every plugin again and swaps the configs in', async () => {
  const before = configuredInstances.length;
  assert.equal(await gw.reload(config('global-v2')), true);
  assert.deepEqual(configuredInstances.slice(before), [8], "tag's configure() sees its 8 enabled instances");
  assert.equal(await tagFor('/d'), 'global-v2');
  assert.equal(await tagFor('/a'), 'route');
});

test('reloads apply in the order they were asked for, even when an earlier one is slower', async () => {
  let releaseSlow!: () => void;
  let slowStarted!: () => void;
  const slowConfigureStarted = new Promise<void>((r) => (slowStarted = r));
  const gate: PluginDefinition<{ value: string }> = {
    name: 'gate',
    version: '1.0.0',
    priority: 10,
    configSchema: valueSchema,
    create: () => ({
      async configure(view) {
        if (view.instances[0]?.config.value !== 'slow') return;
        slowStarted();
        await new Promise<void>((r) => (releaseSlow = r));
      },
      access(ctx, config) {
        ctx.setUpstreamHeader('x-gate', config.value);
      },
    }),
  };
  const serial = await startWithRegistry(
    { services: [{ name: 's', url: echo.url, routes: [{ paths: ['/'] }] }], plugins: [{ name: 'gate', config: { value: 'v1' } }] },
    new Map([['gate', gate as PluginDefinition]]),
  );
  try {
    const withGate = (value: string) => ({ services: [{ name: 's', url: echo.url, routes: [{ paths: ['/'] }] }], plugins: [{ name: 'gate', config: { value } }] });
    const first = serial.reload(withGate('slow'));
    await slowConfigureStarted;
    const second = serial.reload(withGate('v3'));
    await new Promise((r) => setTimeout(r, 50));
    releaseSlow();
    assert.deepEqual(await Promise.all([first, second]), [true, true]);
    assert.equal((await request(`${serial.http}/x`)).json().headers['x-gate'], 'v3', 'the last file written wins');
  } finally {
    await serial.stop();
  }
});

test('a reload a plugin refuses in configure() changes nothing: plugins and consumers stay on the current config', async () => {
  const picky: PluginDefinition<{ value: string }> = {
    name: 'picky',
    version: '1.0.0',
    priority: 10,
    configSchema: valueSchema,
    create: () => {
      let current = '';
      return {
        configure(view) {
          const value = view.instances[0]?.config.value ?? '';
          if (value === 'refuse') throw new Error('picky refuses this configuration');
          current = value;
        },
        access(ctx) {
          ctx.setUpstreamHeader('x-picky', current);
        },
      };
    },
  };
  const configWith = (value: string, consumer: string) => ({
    services: [{ name: 's', url: echo.url, routes: [{ paths: ['/'] }] }],
    consumers: [{ username: consumer }],
    plugins: [{ name: 'picky', config: { value } }],
  });
  const gw2 = await startWithRegistry(configWith('first', 'ann'), new Map([['picky', picky as PluginDefinition]]));
  try {
    await assert.rejects(gw2.reload(configWith('refuse', 'ben')), /picky refuses/);
    assert.equal((await request(`${gw2.http}/x`)).json().headers['x-picky'], 'first');
    assert.equal((await request(`${gw2.admin}/consumers/ann`)).status, 200);
    assert.equal((await request(`${gw2.admin}/consumers/ben`)).status, 404, 'the refused file’s consumers are not in');
    assert.equal(await gw2.reload(configWith('second', 'ben')), true, 'a later good file still applies');
    assert.equal((await request(`${gw2.http}/x`)).json().headers['x-picky'], 'second');
    assert.equal((await request(`${gw2.admin}/consumers/ben`)).status, 200);
  } finally {
    await gw2.stop();
  }
});

test('plugin configs are validated against the schema of the registry in use', async () => {
  const { writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const file = join(tempDir('tollgate-plugins-'), 'gateway.yaml');
  writeFileSync(
    file,
    [
      '_format_version: "3.0"',
      'gateway: { proxy_listen: ["127.0.0.1:0"], admin_listen: ["127.0.0.1:0"], log_level: silent }',
      'plugins:',
      '  - name: tag',
      '    config: { colour: blue }',
      '  - name: auth',
      '    consumer: someone',
      '  - name: oauth2',
      '',
    ].join('\n'),
  );
  const err = await Gateway.start(file, { registry }).then(
    () => assert.fail('should not start'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConfigLoadError);
  assert.deepEqual(
    err.errors.map(String),
    [
      `${file}:5:13: plugins[0].config.value: required field missing`,
      `${file}:5:15: plugins[0].config.colour: unknown field`,
      `${file}:7:15: plugins[1].consumer: invalid reference 'consumer: someone' (no such entry in 'consumers')`,
      `${file}:8:11: plugins[2].name: plugin 'oauth2' not enabled; add it to the 'plugins' configuration property`,
    ],
  );
});

test('prepare runs once per instance and configuration; its hooks read plugin.prepared; a compile error refuses the file at its position', async () => {
  const prepared: string[] = [];
  const stamp: PluginDefinition<{ value: string }, { upper: string }> = {
    name: 'stamp',
    version: '1.0.0',
    priority: 10,
    configSchema: valueSchema,
    prepare(config) {
      if (config.value === 'bad') throw new ConfigCompileError(['value'], 'cannot compile this value');
      prepared.push(config.value);
      return { upper: config.value.toUpperCase() };
    },
    create: () => ({
      access(ctx, _config, plugin) {
        ctx.setUpstreamHeader('x-stamp', plugin.prepared.upper);
      },
      response(_ctx, _config, response, plugin) {
        response.headers['x-stamp-seen'] = plugin.prepared.upper;
      },
    }),
  };
  const configWith = (value: string) => ({ services: [{ name: 's', url: echo.url, routes: [{ paths: ['/'] }] }], plugins: [{ name: 'stamp', config: { value } }] });
  const stamps = new Map([['stamp', stamp as PluginDefinition]]);
  const gw2 = await startWithRegistry(configWith('first'), stamps);
  try {
    const res = await request(`${gw2.http}/x`);
    assert.equal(res.json().headers['x-stamp'], 'FIRST');
    assert.equal(res.headers['x-stamp-seen'], 'FIRST');
    await request(`${gw2.http}/x`);
    assert.deepEqual(prepared, ['first'], 'prepared once, not per request');
    const shown = (await request(`${gw2.admin}/plugins`)).json().data[0];
    assert.equal('prepared' in shown, false, 'the admin API shows the instance as the file declares it');

    assert.equal(await gw2.reload(configWith('bad')), false);
    const refused = await gw2.gateway.reload(); // the same file again, for its errors
    assert.deepEqual(refused.ok ? [] : refused.errors.map((e) => `${e.path}: ${e.message}`), ['plugins[0].config.value: cannot compile this value']);
    assert.equal((await request(`${gw2.http}/x`)).json().headers['x-stamp'], 'FIRST', 'the current configuration stays');
    assert.equal(await gw2.reload(configWith('second')), true);
    assert.equal((await request(`${gw2.http}/x`)).json().headers['x-stamp'], 'SECOND');
  } finally {
    await gw2.stop();
  }
  await assert.rejects(startWithRegistry(configWith('bad'), stamps), (err: unknown) => {
    assert.ok(err instanceof ConfigLoadError);
    assert.match(String(err.errors[0]), /:\d+:\d+: plugins\[0\]\.config\.value: cannot compile this value$/);
    return true;
  });
});

test('a response body is observed chunk by chunk as it passes; an observer that throws is dropped and the body goes on whole', async () => {
  watched.length = 0;
  const reply = await request(`${gw.http}/watched/some/path?${'q'.repeat(5000)}`);
  assert.equal(reply.status, 200);
  assert.equal(reply.json().path, '/some/path', 'the body arrived whole');
  await waitFor(() => watched.length === 1, 'the log phase');
  assert.deepEqual(watched[0], { seen: reply.body.length, sent: reply.body.length, status: 200 });
});
