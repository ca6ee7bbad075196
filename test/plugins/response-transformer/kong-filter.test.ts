/**
 * Kong's response-transformer catalogue (spec/03-plugins/15-response-transformer/01-header_transformer_spec.lua,
 * 02-body_transformer_spec.lua, 04-filter_spec.lua, 05-big_response_body_spec.lua) through a real gateway
 * and an upstream answering the JSON and headers each case asks for: headers removed, renamed, replaced,
 * added, appended; JSON bodies changed the same ways with json_types; Content-Length following the new body;
 * non-JSON bodies untouched; another plugin's answer transformed too; and a large body.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';

const ADD = { json: ['p1:v1', 'p3:value:3', 'p4:"v1"', 'p5:-1', 'p6:false', 'p7:true'], json_types: ['string', 'string', 'string', 'number', 'boolean', 'boolean'] };
const APPEND = { json: ['p1:v1', 'p3:"v1"', 'p4:-1', 'p5:false', 'p6:true'], json_types: ['string', 'string', 'number', 'boolean', 'boolean'] };

describe('response-transformer (filter)', () => {
  let upstream: Upstream;
  let gw: TestGateway;

  before(async () => {
    // Answers ?body=… with ?type=… (default JSON) and every other parameter as a response header.
    upstream = await startUpstream((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const body = url.searchParams.get('body') ?? JSON.stringify({ url: `http://upstream${req.url}`, headers: req.headers, uri_args: {} });
      res.setHeader('content-type', url.searchParams.get('type') ?? 'application/json');
      for (const [name, value] of url.searchParams) if (name !== 'body' && name !== 'type') res.setHeader(name, value);
      if (url.pathname === '/big') return res.end(JSON.stringify({ big: 'x'.repeat(2 * 1024 * 1024), drop: 1 }));
      res.end(body);
    });
    const rt = (config: Record<string, unknown>) => ({ name: 'response-transformer', config });
    const routes: Record<string, unknown>[] = [
      { hosts: ['response.test'], plugins: [rt({ remove: { headers: ['Access-Control-Allow-Origin'], json: ['url'] } })] },
      { hosts: ['response2.test'], plugins: [rt({ replace: { json: ['headers:/hello/world', 'uri_args:this is a / test', 'url:"wot"'] } })] },
      { hosts: ['response3.test'], plugins: [rt({ remove: { json: ['ip'] } }), { name: 'request-termination', config: { status_code: 401, message: 'Unauthorized' } }] },
      { hosts: ['add.test'], plugins: [rt({ add: ADD })] },
      { hosts: ['append.test'], plugins: [rt({ append: APPEND })] },
      { hosts: ['remove.test'], plugins: [rt({ remove: { json: ['p1', 'p2'] } })] },
      { hosts: ['rename.test'], plugins: [rt({ rename: { json: ['p1:k1', 'p2:k2', 'p3:k3', 'p4:k4'] } })] },
      { hosts: ['replace.test'], plugins: [rt({ replace: { json: ['p1:v1', 'p2:"v1"', 'p3:-1', 'p4:false'], json_types: ['string', 'string', 'number', 'boolean'] } })] },
      {
        hosts: ['headers.test'],
        plugins: [
          rt({
            remove: { headers: ['h1', 'h2'] },
            rename: { headers: ['h3:h3-renamed'] },
            replace: { headers: ['h4:replaced', 'h-missing:never'] },
            add: { headers: ['h5:added', 'h4:not-added'] },
            append: { headers: ['h6:appended', 'h7:new'] },
          }),
        ],
      },
      { hosts: ['big.test'], plugins: [rt({ remove: { json: ['drop'] } })] },
    ];
    gw = await startGateway({ services: [{ name: 'mock', url: upstream.url, routes: routes.map((r, i) => ({ name: `r${i}`, ...r })) }] });
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  const GET = (host: string, path = '/get') => request(gw.http + path, { headers: { host } });
  const withBody = (host: string, body: unknown, type?: string) => GET(host, `/get?body=${encodeURIComponent(typeof body === 'string' ? body : JSON.stringify(body))}${type ? `&type=${encodeURIComponent(type)}` : ''}`);

  test('remove a parameter', async () => {
    const res = await GET('response.test');
    assert.equal(res.status, 200);
    assert.equal(res.json().url, undefined);
    assert.equal(Number(res.headers['content-length']), res.body.length, 'Content-Length follows the new body');
  });

  test('remove a header', async () => {
    const res = await GET('response.test', '/response-headers?Access-Control-Allow-Origin=*');
    assert.equal(res.status, 200);
    assert.equal(res.headers['access-control-allow-origin'], undefined);
  });

  test('replace a body parameter on GET', async () => {
    const json = (await GET('response2.test')).json();
    assert.equal(json.headers, '/hello/world');
    assert.equal(json.url, '"wot"');
    assert.equal(json.uri_args, 'this is a / test');
  });

  test('does not throw an error when request was short-circuited in access phase (regression: Kong #3521)', async () => {
    const res = await GET('response3.test');
    assert.equal(res.status, 401);
    assert.deepEqual(res.json(), { message: 'Unauthorized' });
  });

  describe('transform_json_body()', () => {
    test('add: parameter, value in double quotes, number, boolean', async () => {
      assert.deepEqual((await withBody('add.test', { p2: 'v1' })).json(), { p1: 'v1', p2: 'v1', p3: 'value:3', p4: '"v1"', p5: -1, p6: false, p7: true });
      assert.deepEqual((await withBody('add.test', { p2: -1 })).json().p2, -1);
      assert.deepEqual((await withBody('add.test', { p2: false })).json().p2, false);
    });
    test('add: preserves empty arrays', async () => {
      const res = await withBody('add.test', { p2: 'v1', a: [] });
      assert.deepEqual(res.json().a, []);
    });
    test('append: new key:value if key does not exists', async () => {
      assert.deepEqual((await withBody('append.test', { p2: 'v1' })).json(), { p2: 'v1', p1: ['v1'], p3: ['"v1"'], p4: [-1], p5: [false], p6: [true] });
    });
    test('append: value if key exists', async () => {
      assert.deepEqual((await withBody('append.test', { p1: 'v2' })).json(), { p1: ['v2', 'v1'], p3: ['"v1"'], p4: [-1], p5: [false], p6: [true] });
      assert.deepEqual((await withBody('append.test', { p4: 'v2' })).json().p4, ['v2', -1]);
      assert.deepEqual((await withBody('append.test', { p5: 'v5', p6: 'v6' })).json().p5, ['v5', false]);
    });
    test('remove: parameter; preserves empty arrays', async () => {
      assert.deepEqual((await withBody('remove.test', { p1: 'v1', p2: 'v1', p3: 'v1' })).json(), { p3: 'v1' });
      assert.deepEqual((await withBody('remove.test', { p1: 'v1', a: [] })).json(), { a: [] });
    });
    test('rename: parameter, number, boolean; a missing one is not added', async () => {
      assert.deepEqual((await withBody('rename.test', { p1: 'v1', p2: -1, p3: false, other: 1 })).json(), { k1: 'v1', k2: -1, k3: false, other: 1 });
    });
    test('replace: parameter if it exists, never adds; typed values', async () => {
      assert.deepEqual((await withBody('replace.test', { p1: 'v2', p2: 'v2', p3: 'v2', p4: 'v2' })).json(), { p1: 'v1', p2: '"v1"', p3: -1, p4: false });
      assert.deepEqual((await withBody('replace.test', { p5: 'v2' })).json(), { p5: 'v2' });
    });
    test('a body that is not JSON, or not declared JSON, goes through untouched', async () => {
      const broken = await withBody('remove.test', '{"p1": broken');
      assert.equal(broken.text, '{"p1": broken');
      const text = await withBody('remove.test', '{"p1":"v1"}', 'text/plain');
      assert.equal(text.text, '{"p1":"v1"}');
      const vendor = await withBody('remove.test', '{"p1":"v1"}', 'application/json; charset=utf-8');
      assert.equal(vendor.text, '{}', 'a JSON type with parameters is JSON');
    });
  });

  describe('execute_headers()', () => {
    test('remove, rename, replace, add and append together', async () => {
      const res = await GET('headers.test', '/response-headers?h1=v1&h2=v2&h3=v3&h4=v4&h6=v6');
      assert.equal(res.headers.h1, undefined);
      assert.equal(res.headers.h2, undefined);
      assert.equal(res.headers.h3, undefined);
      assert.equal(res.headers['h3-renamed'], 'v3');
      assert.equal(res.headers.h4, 'replaced');
      assert.equal(res.headers['h-missing'], undefined);
      assert.equal(res.headers.h5, 'added');
      assert.equal(res.headers.h6, 'v6, appended');
      assert.equal(res.headers.h7, 'new');
    });
  });

  test('a large JSON body is transformed whole (big response body)', async () => {
    const res = await GET('big.test', '/big');
    assert.equal(res.status, 200);
    const json = res.json();
    assert.equal(json.big.length, 2 * 1024 * 1024);
    assert.equal(json.drop, undefined);
  });
});

describe('response-transformer (schema)', () => {
  const check = (config: Record<string, unknown>) => pluginConfigErrors('response-transformer', config);
  test('defaults', async () => assert.deepEqual(await check({}), []));
  test('a pair needs a colon', async () => assert.deepEqual(await check({ add: { json: ['novalue'] } }), ['config.add.json[0]: invalid value']));
  test('json_types are boolean, number or string', async () => {
    assert.deepEqual(await check({ add: { json: ['a:1'], json_types: ['integer'] } }), ['config.add.json_types[0]: expected one of: boolean, number, string']);
  });
  test('renamed headers must be header names', async () => {
    assert.deepEqual(await check({ rename: { headers: ['a:bad header'] } }), ["config.rename.headers[0]: 'bad header' is not a valid header"]);
  });
});
