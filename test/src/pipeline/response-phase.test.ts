/**
 * The plugin API's answer-side pieces, with a test-only registry: the response phase runs on every answer
 * of a matched request (the upstream's, a plugin's, an upstream failure) for every collected plugin, those
 * after the answering one included, with the answer's source; headers set during access reach any answer;
 * bodies are rewritten (proxied and the gateway's own), and a body beyond the limit streams unchanged;
 * bodies are transformed as they stream (observers see what the client gets, a rewrite gets the
 * transformed body); plugins change the upstream path and method, and send a request to another origin;
 * regex captures reach plugins; the log phase sees every collected plugin.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { PluginDefinition, ResponseHead } from '../../../src/pdk/types.ts';
import { REWRITABLE_BODY_LIMIT } from '../../../src/pipeline/response-phase.ts';
import { request, startUpstream, type Upstream } from '../../helpers/gateway.ts';
import { closedPort, startWithRegistry, type RegistryGateway } from '../../helpers/support.ts';

const empty = { type: 'record' as const, fields: {} };
const logged: string[] = [];

/** Records every response phase it sees as `x-seen-<name>: <status> <source>`, and every log phase. */
function observer(name: string, priority: number): PluginDefinition {
  return {
    name,
    version: '1.0.0',
    priority,
    configSchema: empty,
    create: () => ({
      access(ctx) {
        ctx.setResponseHeader(`x-set-by-${name}`, 'yes');
      },
      response(_ctx, _config, head: ResponseHead) {
        head.headers[`x-seen-${name}`] = `${head.status} ${head.source}`;
      },
      log(ctx) {
        logged.push(`${name}:${ctx.route.name}`);
      },
    }),
  };
}

const stopper: PluginDefinition<{ status: number }> = {
  name: 'stopper',
  version: '1.0.0',
  priority: 500,
  configSchema: { type: 'record', fields: { status: { type: 'integer', default: 418 }, fail: { type: 'boolean', default: false } } },
  create: () => ({
    access(ctx, config: any) {
      if (config.fail) throw new Error('bug');
      ctx.respond(config.status, { message: 'stopped', captures: ctx.uriCaptures });
    },
  }),
};

const upper: PluginDefinition = {
  name: 'upper',
  version: '1.0.0',
  priority: 300,
  configSchema: empty,
  create: () => ({
    response(_ctx, _config, head) {
      head.rewriteBody?.((body) => Buffer.from(body.toString('latin1').toUpperCase(), 'latin1'));
    },
  }),
};

const reroute: PluginDefinition = {
  name: 'reroute',
  version: '1.0.0',
  priority: 400,
  configSchema: empty,
  create: () => ({
    access(ctx) {
      ctx.setUpstreamMethod('PUT');
      ctx.setUpstreamPath(`/moved/${ctx.uriCaptures.name} ?#`);
    },
  }),
};

/** What the `numbered` plugin's observer saw of the body, chunk by chunk. */
const observedChunks: string[] = [];

/** Numbers the lines of the body as it streams, holding back only a line not ended yet. */
const numbered: PluginDefinition = {
  name: 'numbered',
  version: '1.0.0',
  priority: 350,
  configSchema: empty,
  create: () => ({
    response(_ctx, _config, head) {
      let count = 0;
      let partial = '';
      const number = (lines: string[]) => Buffer.from(lines.map((line) => `${++count}: ${line}\n`).join(''));
      head.transformBody?.({
        write(chunk) {
          const lines = (partial + chunk.toString('utf8')).split('\n');
          partial = lines.pop()!;
          return number(lines);
        },
        end: () => number(partial === '' ? [] : [partial]),
      });
      head.observeBody?.((chunk) => observedChunks.push(chunk.toString('utf8')));
    },
  }),
};

const elsewhere: PluginDefinition<{ url: string }> = {
  name: 'elsewhere',
  version: '1.0.0',
  priority: 400,
  configSchema: { type: 'record', fields: { url: { type: 'string', required: true } } },
  create: () => ({
    access(ctx, config) {
      ctx.setUpstreamUrl(new URL(config.url));
    },
  }),
};

const registry = new Map<string, PluginDefinition>([observer('first', 1000), observer('last', 10), stopper, upper, reroute, numbered, elsewhere].map((p) => [p.name, p as PluginDefinition]));

let echo: Upstream;
let big: Upstream;
let lines: Upstream;
let gw: RegistryGateway;

before(async () => {
  echo = await startUpstream();
  big = await startUpstream((_req, res) => res.end('x'.repeat(REWRITABLE_BODY_LIMIT + 10)));
  lines = await startUpstream((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 12 });
    res.write('alpha\nbe');
    setImmediate(() => res.end('ta\nc'));
  });
  const dead = `http://127.0.0.1:${await closedPort()}`;
  gw = await startWithRegistry(
    {
      services: [
        {
          name: 'echo',
          url: echo.url,
          routes: [
            { name: 'proxied', paths: ['/proxied'], plugins: [{ name: 'first' }, { name: 'last' }] },
            { name: 'stopped', paths: ['~/stopped/(?<name>\\w+)'], plugins: [{ name: 'first' }, { name: 'last' }, { name: 'stopper' }] },
            { name: 'failing', paths: ['/failing'], plugins: [{ name: 'last' }, { name: 'stopper', config: { fail: true } }] },
            { name: 'upper', paths: ['/upper'], plugins: [{ name: 'upper' }] },
            { name: 'upper-answer', paths: ['/upper-answer'], plugins: [{ name: 'upper' }, { name: 'stopper', config: { status: 200 } }] },
            { name: 'reroute', paths: ['~/reroute/(?<name>\\w+)'], plugins: [{ name: 'reroute' }] },
          ],
        },
        { name: 'big', url: big.url, routes: [{ name: 'big', paths: ['/big'], plugins: [{ name: 'upper' }] }] },
        {
          name: 'lines',
          url: lines.url,
          routes: [
            { name: 'numbered', paths: ['/numbered'], plugins: [{ name: 'numbered' }] },
            { name: 'numbered-upper', paths: ['/numbered-upper'], plugins: [{ name: 'numbered' }, { name: 'upper' }] },
            { name: 'numbered-answer', paths: ['/numbered-answer'], plugins: [{ name: 'numbered' }, { name: 'stopper', config: { status: 200 } }] },
          ],
        },
        { name: 'nowhere', url: dead, routes: [{ name: 'elsewhere', paths: ['/elsewhere'], plugins: [{ name: 'elsewhere', config: { url: `${echo.url}/over/there` } }] }] },
        { name: 'dead', url: dead, retries: 0, routes: [{ name: 'dead', paths: ['/dead'], plugins: [{ name: 'first' }] }] },
      ],
    },
    registry,
  );
});

after(async () => {
  await gw?.stop();
  await echo?.close();
  await big?.close();
  await lines?.close();
});

test('the response phase sees the upstream answer as `service`; headers set in access reach it', async () => {
  const reply = await request(`${gw.http}/proxied`);
  assert.equal(reply.status, 200);
  assert.equal(reply.headers['x-seen-first'], '200 service');
  assert.equal(reply.headers['x-seen-last'], '200 service');
  assert.equal(reply.headers['x-set-by-first'], 'yes');
  assert.equal(reply.headers['x-set-by-last'], 'yes');
});

test("a plugin's answer goes through every collected plugin's response and log phases, those after it too", async () => {
  logged.length = 0;
  const reply = await request(`${gw.http}/stopped/alice`);
  assert.equal(reply.status, 418);
  assert.equal(reply.headers['x-seen-first'], '418 exit');
  assert.equal(reply.headers['x-seen-last'], '418 exit', 'priority 10 runs after the answering plugin (500): collected, not run');
  assert.equal(reply.headers['x-set-by-first'], 'yes');
  assert.equal(reply.headers['x-set-by-last'], undefined, 'its access did not run');
  assert.deepEqual(reply.json().captures, { '0': '/stopped/alice', '1': 'alice', name: 'alice' });
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(logged.sort(), ['first:stopped', 'last:stopped']);
});

test('an unexpected plugin failure is answered 500 with source `error`', async () => {
  const reply = await request(`${gw.http}/failing`);
  assert.equal(reply.status, 500);
  assert.equal(reply.headers['x-seen-last'], '500 error');
});

test('an upstream failure goes through the response phase as the gateway\'s own answer', async () => {
  const reply = await request(`${gw.http}/dead`);
  assert.equal(reply.status, 502);
  assert.equal(reply.headers['x-seen-first'], '502 exit');
});

test('a proxied body is rewritten whole, with its Content-Length', async () => {
  const reply = await request(`${gw.http}/upper?q=abc`);
  assert.equal(reply.status, 200);
  assert.equal(JSON.parse(reply.text.toLowerCase()).query, 'q=abc');
  assert.match(reply.text, /"QUERY":"Q=ABC"/);
  assert.equal(Number(reply.headers['content-length']), reply.body.length);
});

test("the gateway's own answers are rewritten too; HEAD has no body to rewrite", async () => {
  const reply = await request(`${gw.http}/upper-answer`);
  assert.equal(reply.status, 200);
  assert.match(reply.text, /"MESSAGE":"STOPPED"/);
  assert.equal(Number(reply.headers['content-length']), reply.body.length);
  const head = await request(`${gw.http}/upper`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.body.length, 0);
});

test('a body beyond the rewrite limit streams through unchanged', async () => {
  const reply = await request(`${gw.http}/big`);
  assert.equal(reply.status, 200);
  assert.equal(reply.body.length, REWRITABLE_BODY_LIMIT + 10);
  assert.equal(reply.text.slice(0, 3), 'xxx');
});

test('plugins set the upstream method and path; unsafe characters are escaped, never a query', async () => {
  const reply = await request(`${gw.http}/reroute/bob?keep=1`, { method: 'POST', body: 'payload' });
  assert.equal(reply.status, 200);
  const echoed = reply.json();
  assert.equal(echoed.method, 'PUT');
  assert.equal(echoed.path, '/moved/bob%20%3F%23');
  assert.equal(echoed.query, 'keep=1');
  assert.equal(echoed.body, 'payload');
});

test('a proxied body is transformed as it streams, without a Content-Length; observers see what the client gets', async () => {
  observedChunks.length = 0;
  const reply = await request(`${gw.http}/numbered`);
  assert.equal(reply.status, 200);
  assert.equal(reply.text, '1: alpha\n2: beta\n3: c\n');
  assert.equal(reply.headers['content-length'], undefined);
  assert.equal(observedChunks.join(''), reply.text);
});

test('a rewrite gets the transformed body; the gateway\'s own answers are transformed whole', async () => {
  const rewritten = await request(`${gw.http}/numbered-upper`);
  assert.equal(rewritten.text, '1: ALPHA\n2: BETA\n3: C\n');
  assert.equal(Number(rewritten.headers['content-length']), rewritten.body.length);
  const answer = await request(`${gw.http}/numbered-answer`);
  assert.match(answer.text, /^1: \{"message":"stopped"/);
  assert.equal(Number(answer.headers['content-length']), answer.body.length);
});

test('a plugin sends the request to another origin and path; the query stays', async () => {
  const reply = await request(`${gw.http}/elsewhere?keep=1`);
  assert.equal(reply.status, 200);
  const echoed = reply.json();
  assert.equal(echoed.path, '/over/there');
  assert.equal(echoed.query, 'keep=1');
  assert.equal(echoed.headers.host, new URL(echo.url).host);
});
