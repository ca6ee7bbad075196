/**
 * Kong's request-transformer catalogue (spec/03-plugins/36-request-transformer/01-schema_spec.lua,
 * 02-access_spec.lua) against a real gateway and an echoing upstream: http_method (with a form body moved
 * to the query), remove/rename/replace/add/append of headers, query parameters and JSON or form bodies,
 * replace.uri, templates ($(headers.x), $(query_params.x), $(uri_captures.x), `or` defaults, escaping,
 * the request's values as the client sent them), host replacement, and the schema, where Kong's Lua
 * expressions other than references are refused when the file loads.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';

const USERS = '~/requests/user1/(?<user1>\\w+)/user2/(?<user2>\\S+)';
const transformer = (config: Record<string, unknown>) => [{ name: 'request-transformer', config }];

describe('request-transformer (access)', () => {
  let upstream: Upstream;
  let gw: TestGateway;

  before(async () => {
    upstream = await startUpstream();
    const routes: Record<string, unknown>[] = [
      { hosts: ['test1.test'], plugins: transformer({ add: { headers: ['h1:v1', 'h2:value:2'], querystring: ['q1:v1'], body: ['p1:v1'] } }) },
      { hosts: ['test2.test'], preserve_host: true, plugins: transformer({ add: { headers: ['host:mark'] } }) },
      {
        hosts: ['test3.test'],
        plugins: transformer({
          add: { headers: ['x-added:a1', 'x-added2:b1', 'x-added3:c2'], querystring: ['query-added:newvalue', 'p1:anything:1'], body: ['newformparam:newvalue'] },
          remove: { headers: ['x-to-remove'], querystring: ['toremovequery'] },
          append: { headers: ['x-added:a2', 'x-added:a3'], querystring: ['p1:a2', 'p2:b1'] },
          replace: { headers: ['x-to-replace:false'], querystring: ['toreplacequery:no'] },
        }),
      },
      { hosts: ['test4.test'], plugins: transformer({ remove: { headers: ['x-to-remove'], querystring: ['q1'], body: ['toremoveform'] } }) },
      { hosts: ['test5.test'], plugins: transformer({ replace: { headers: ['h1:v1'], querystring: ['q1:v1'], body: ['p1:v1'] } }) },
      { hosts: ['test6.test'], plugins: transformer({ append: { headers: ['h1:v1', 'h1:v2', 'h2:v1'], querystring: ['q1:v1', 'q1:v2', 'q2:v1'], body: ['p1:v1', 'p1:v2', 'p2:value:1'] } }) },
      { hosts: ['test7.test'], plugins: transformer({ http_method: 'POST' }) },
      { hosts: ['test8.test'], plugins: transformer({ http_method: 'GET' }) },
      { hosts: ['test9.test'], plugins: transformer({ rename: { headers: ['x-to-rename:x-is-renamed'], querystring: ['originalparam:renamedparam'], body: ['originalparam:renamedparam'] } }) },
      { hosts: ['test10.test'], paths: [USERS], strip_path: false, plugins: transformer({ add: { querystring: ['uri_param1:$(uri_captures.user1)', 'uri_param2[some_index][1]:$(uri_captures.user2)'] } }) },
      { hosts: ['test11.test'], paths: [USERS], plugins: transformer({ replace: { uri: '/requests/user2/$(uri_captures.user2)/user1/$(uri_captures.user1)' } }) },
      { hosts: ['test12.test'], paths: ['/requests/'], strip_path: false, plugins: transformer({ add: { querystring: ["uri_param1:$(uri_captures.user1 or 'default1')", "uri_param2:$(uri_captures.user2 or 'default2')"] } }) },
      { hosts: ['test14.test'], paths: ['~/user1/(?<user1>\\w+)/user2/(?<user2>\\S+)'], plugins: transformer({ replace: { uri: '/requests$(uri_captures[0])' } }) },
      { hosts: ['test15.test'], paths: [USERS], strip_path: false, plugins: transformer({ add: { querystring: ['uri_param1:$(uri_captures.user1)', 'uri_param2:$(headers.host)'], headers: ['x-test-header:$(query_params.q1)'] }, remove: { querystring: ['q1'] } }) },
      {
        hosts: ['test16.test'],
        paths: [USERS],
        strip_path: false,
        plugins: transformer({ replace: { querystring: ["q2:$(headers['x-remove-header'])"] }, add: { querystring: ['q1:$(uri_captures.user1)'], headers: ["x-test-header:$(headers['x-remove-header'])"] }, remove: { headers: ['x-remove-header'] } }),
      },
      {
        hosts: ['test17.test'],
        paths: [USERS],
        strip_path: false,
        plugins: transformer({ replace: { querystring: ["q2:$(headers['x-replace-header'])"], headers: ['x-replace-header:the new value'] }, add: { querystring: ['q1:$(uri_captures.user1)'], headers: ["x-test-header:$(headers['x-replace-header'])"] } }),
      },
      { hosts: ['test18.test'], paths: [USERS], strip_path: false, plugins: transformer({ add: { querystring: ["q1:$('$(uri_captures.user1)')"] } }) },
      { hosts: ['test20.test'], plugins: transformer({ http_method: 'POST', add: { headers: ['Content-Type:application/json'], body: ['body:somecontent'] } }) },
      { hosts: ['test22.test'], plugins: transformer({ http_method: 'POST', remove: { headers: ['Authorization'] }, add: { headers: ['Authorization:Basic test'] } }) },
      { hosts: ['test23.test'], paths: ['/request'], plugins: transformer({}) },
      { hosts: ['test26.test'], plugins: transformer({ add: { headers: ['X-aDDed:a1', 'x-aDDed2:b1', 'x-Added3:c2'] }, remove: { headers: ['X-To-Remove'] }, append: { headers: ['X-aDDed:a2', 'X-aDDed:a3'] }, replace: { headers: ['x-to-Replace:false'] } }) },
      { hosts: ['test27.test'], plugins: transformer({ replace: { uri: '/requests/tést' } }) },
      { hosts: ['test29.test'], paths: ['~/(gw/)?api/(?<subpath>htest)$'], strip_path: false, plugins: transformer({ replace: { uri: '/api/v2/$(uri_captures["subpath"])' } }) },
      { hosts: ['test30.test'], plugins: transformer({ remove: { headers: ['x-to-remove'] }, add: { headers: ['x-to-remove:new'] } }) },
    ];
    gw = await startGateway({ services: [{ name: 'mock', url: upstream.url, routes: routes.map((r, i) => ({ name: `r${i}`, ...r })) }] });
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  interface Sent {
    method: string;
    path: string;
    query: URLSearchParams;
    rawQuery: string;
    headers: Record<string, string | undefined>;
    body: string;
  }

  /** What the upstream received. */
  async function send(host: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Sent> {
    const res = await request(gw.http + path, { method: options.method, headers: { host, ...options.headers }, body: options.body });
    assert.equal(res.status, 200, res.text);
    const echo = res.json();
    return { method: echo.method, path: echo.path, query: new URLSearchParams(echo.query), rawQuery: echo.query, headers: echo.headers, body: echo.body };
  }
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const json = { 'content-type': 'application/json' };

  describe('http method', () => {
    test('changes the HTTP method from GET to POST', async () => {
      const sent = await send('test7.test', '/request?hello=world&name=marco');
      assert.equal(sent.method, 'POST');
      assert.equal(sent.query.get('hello'), 'world');
      assert.equal(sent.query.get('name'), 'marco');
    });
    test('changes the HTTP method from POST to GET', async () => {
      const sent = await send('test8.test', '/request?hello=world', { method: 'POST', headers: form, body: 'name=marco' });
      assert.equal(sent.method, 'GET');
      assert.equal(sent.query.get('hello'), 'world');
      assert.equal(sent.query.get('name'), 'marco');
    });
    test('changes the HTTP method from GET to POST and adds JSON body', async () => {
      const sent = await send('test20.test', '/request');
      assert.equal(sent.method, 'POST');
      assert.equal(sent.headers['content-type'], 'application/json');
      assert.deepEqual(JSON.parse(sent.body), { body: 'somecontent' });
    });
  });

  describe('remove', () => {
    test('specified header', async () => {
      const sent = await send('test4.test', '/request', { headers: { 'x-to-remove': 'true', 'x-another-header': 'true' } });
      assert.equal(sent.headers['x-to-remove'], undefined);
      assert.equal(sent.headers['x-another-header'], 'true');
    });
    test('parameters on url encoded form POST', async () => {
      const sent = await send('test4.test', '/request', { method: 'POST', headers: form, body: 'toremoveform=yes&nottoremove=yes' });
      const body = new URLSearchParams(sent.body);
      assert.equal(body.get('toremoveform'), null);
      assert.equal(body.get('nottoremove'), 'yes');
      assert.equal(sent.headers['content-length'], String(Buffer.byteLength(sent.body)));
    });
    test('parameters from JSON body in POST', async () => {
      const sent = await send('test4.test', '/request', { method: 'POST', headers: json, body: JSON.stringify({ toremoveform: 'yes', nottoremove: 'yes' }) });
      assert.deepEqual(JSON.parse(sent.body), { nottoremove: 'yes' });
    });
    test('does not fail if JSON body is malformed in POST', async () => {
      const sent = await send('test4.test', '/request', { method: 'POST', headers: json, body: 'malformed json body' });
      assert.equal(sent.body, 'malformed json body');
    });
    test('does not fail if body is empty and content type is application/json in POST', async () => {
      const sent = await send('test4.test', '/request', { method: 'POST', headers: json, body: '{}' });
      assert.equal(sent.body, '{}');
      assert.equal(sent.headers['content-length'], '2');
    });
    test('does not fail if body is empty in POST', async () => {
      const sent = await send('test4.test', '/request', { method: 'POST', body: '' });
      assert.equal(sent.body, '');
      assert.equal(sent.headers['content-length'], '0');
    });
    test('args on GET if it exist', async () => {
      const sent = await send('test4.test', '/request?q1=v1&q2=v2');
      assert.equal(sent.query.get('q1'), null);
      assert.equal(sent.query.get('q2'), 'v2');
    });
    test('preserves empty json array', async () => {
      const sent = await send('test4.test', '/request', { method: 'POST', headers: json, body: JSON.stringify({ emptyarray: [] }) });
      assert.equal(sent.body, '{"emptyarray":[]}');
    });
  });

  describe('rename', () => {
    test('specified header', async () => {
      const sent = await send('test9.test', '/request', { headers: { 'x-to-rename': 'true', 'x-another-header': 'true' } });
      assert.equal(sent.headers['x-to-rename'], undefined);
      assert.equal(sent.headers['x-is-renamed'], 'true');
      assert.equal(sent.headers['x-another-header'], 'true');
    });
    test('does not add as new header if header does not exist', async () => {
      const sent = await send('test9.test', '/request', { headers: { 'x-another-header': 'true' } });
      assert.equal(sent.headers['x-is-renamed'], undefined);
    });
    test('override value if target header already exist', async () => {
      const sent = await send('test9.test', '/request', { headers: { 'x-to-rename': 'new-result', 'x-is-renamed': 'old-result' } });
      assert.equal(sent.headers['x-is-renamed'], 'new-result');
    });
    test('specified parameters in url encoded body on POST', async () => {
      const sent = await send('test9.test', '/request', { method: 'POST', headers: form, body: 'originalparam=yes&nottorename=yes' });
      const body = new URLSearchParams(sent.body);
      assert.equal(body.get('originalparam'), null);
      assert.equal(body.get('renamedparam'), 'yes');
      assert.equal(body.get('nottorename'), 'yes');
    });
    test('parameters from JSON body in POST', async () => {
      const sent = await send('test9.test', '/request', { method: 'POST', headers: json, body: JSON.stringify({ originalparam: 'yes', nottorename: 'yes' }) });
      assert.deepEqual(JSON.parse(sent.body), { nottorename: 'yes', renamedparam: 'yes' });
    });
    test('args on GET if it exists', async () => {
      const sent = await send('test9.test', '/request?originalparam=true&nottorename=true');
      assert.equal(sent.query.get('originalparam'), null);
      assert.equal(sent.query.get('renamedparam'), 'true');
      assert.equal(sent.query.get('nottorename'), 'true');
    });
  });

  describe('replace', () => {
    test('specified header if it exist', async () => {
      const sent = await send('test5.test', '/request', { headers: { h1: 'V', h2: 'v2' } });
      assert.equal(sent.headers.h1, 'v1');
      assert.equal(sent.headers.h2, 'v2');
    });
    test('does not add as new header if header does not exist', async () => {
      const sent = await send('test5.test', '/request', { headers: { h2: 'v2' } });
      assert.equal(sent.headers.h1, undefined);
    });
    test('specified parameters in url encoded body on POST', async () => {
      const sent = await send('test5.test', '/request', { method: 'POST', headers: form, body: 'p1=v&p2=v1' });
      const body = new URLSearchParams(sent.body);
      assert.equal(body.get('p1'), 'v1');
      assert.equal(body.get('p2'), 'v1');
    });
    test('does not add as new parameter in json if parameter does not exist on POST', async () => {
      const sent = await send('test5.test', '/request', { method: 'POST', headers: json, body: JSON.stringify({ p2: 'v1' }) });
      assert.deepEqual(JSON.parse(sent.body), { p2: 'v1' });
    });
    test('args on POST if it exist', async () => {
      const sent = await send('test5.test', '/request?q1=v&q2=v2', { method: 'POST', headers: form, body: 'hello=world' });
      assert.equal(sent.query.get('q1'), 'v1');
      assert.equal(sent.query.get('q2'), 'v2');
    });
    test('replaces request uri with optional capture prefix', async () => {
      const sent = await send('test29.test', '/api/htest');
      assert.equal(sent.path, '/api/v2/htest');
    });
    test('replaces request uri with the capture prefix', async () => {
      const sent = await send('test29.test', '/gw/api/htest');
      assert.equal(sent.path, '/api/v2/htest');
    });
    test('escapes a replaced uri', async () => {
      const sent = await send('test27.test', '/');
      assert.equal(sent.path, '/requests/t%C3%A9st');
    });
  });

  describe('add', () => {
    test('new headers, a value may hold a colon', async () => {
      const sent = await send('test1.test', '/request');
      assert.equal(sent.headers.h1, 'v1');
      assert.equal(sent.headers.h2, 'value:2');
    });
    test('does not change or append value if header already exists', async () => {
      const sent = await send('test1.test', '/request', { headers: { h1: 'v3' } });
      assert.equal(sent.headers.h1, 'v3');
    });
    test('new parameter in url encoded body on POST', async () => {
      const sent = await send('test1.test', '/request', { method: 'POST', headers: form, body: 'hello=world' });
      const body = new URLSearchParams(sent.body);
      assert.equal(body.get('hello'), 'world');
      assert.equal(body.get('p1'), 'v1');
    });
    test('does not change or append value to parameter in JSON on POST when parameter exists', async () => {
      const sent = await send('test1.test', '/request', { method: 'POST', headers: json, body: JSON.stringify({ p1: 'this should not change', hello: 'world' }) });
      assert.deepEqual(JSON.parse(sent.body), { p1: 'this should not change', hello: 'world' });
    });
    test('new parameter in JSON body on POST', async () => {
      const sent = await send('test1.test', '/request', { method: 'POST', headers: json, body: JSON.stringify({ hello: 'world' }) });
      assert.deepEqual(JSON.parse(sent.body), { hello: 'world', p1: 'v1' });
    });
    test('new querystring on GET', async () => {
      const sent = await send('test1.test', '/request?q2=v2');
      assert.equal(sent.query.get('q1'), 'v1');
      assert.equal(sent.query.get('q2'), 'v2');
    });
    test('does not change or append value to querystring on GET if querystring exists', async () => {
      const sent = await send('test1.test', '/request?q1=v2');
      assert.deepEqual(sent.query.getAll('q1'), ['v2']);
    });
    test('should not change the host header', async () => {
      const sent = await send('test2.test', '/request');
      assert.equal(sent.headers.host, 'test2.test');
    });
  });

  describe('append', () => {
    test('new header if header does not exists', async () => {
      const sent = await send('test6.test', '/request');
      assert.equal(sent.headers.h2, 'v1');
    });
    test('values to existing headers', async () => {
      const sent = await send('test6.test', '/request', { headers: { h1: 'v0' } });
      assert.equal(sent.headers.h1, 'v0, v1, v2');
    });
    test('new querystring if querystring does not exists', async () => {
      const sent = await send('test6.test', '/request?q3=v2');
      assert.equal(sent.query.get('q2'), 'v1');
    });
    test('values to existing querystring', async () => {
      const sent = await send('test6.test', '/request?q1=v0');
      assert.deepEqual(sent.query.getAll('q1'), ['v0', 'v1', 'v2']);
    });
    test('new parameter in url encoded body on POST if it does not exist', async () => {
      const sent = await send('test6.test', '/request', { method: 'POST', headers: form, body: '' });
      const body = new URLSearchParams(sent.body);
      assert.deepEqual(body.getAll('p1'), ['v1', 'v2']);
      assert.equal(body.get('p2'), 'value:1');
    });
    test('values to existing parameter in url encoded body if parameter already exist on POST', async () => {
      const sent = await send('test6.test', '/request', { method: 'POST', headers: form, body: 'p1=v0' });
      assert.deepEqual(new URLSearchParams(sent.body).getAll('p1'), ['v0', 'v1', 'v2']);
    });
  });

  describe('remove, replace, add and append', () => {
    test('all four together on headers and the query', async () => {
      const sent = await send('test3.test', '/request?q1=20&toremovequery=yes&toreplacequery=yes', {
        headers: { 'x-to-remove': 'true', 'x-to-replace': 'true', 'x-added3': 'c1' },
      });
      assert.equal(sent.headers['x-to-remove'], undefined);
      assert.equal(sent.headers['x-to-replace'], 'false');
      assert.equal(sent.headers['x-added'], 'a1, a2, a3');
      assert.equal(sent.headers['x-added2'], 'b1');
      assert.equal(sent.headers['x-added3'], 'c1', 'add does not change an existing header');
      assert.equal(sent.query.get('toremovequery'), null);
      assert.equal(sent.query.get('toreplacequery'), 'no');
      assert.equal(sent.query.get('query-added'), 'newvalue');
      assert.deepEqual(sent.query.getAll('p1'), ['anything:1', 'a2']);
      assert.equal(sent.query.get('p2'), 'b1');
    });
    test('header names are case-insensitive; the request case and the config case both work', async () => {
      const sent = await send('test26.test', '/request', { headers: { 'x-to-remove': 'true', 'X-TO-REPLACE': 'true' } });
      assert.equal(sent.headers['x-to-remove'], undefined);
      assert.equal(sent.headers['x-to-replace'], 'false');
      assert.equal(sent.headers['x-added'], 'a1, a2, a3');
    });
  });

  describe('request rewrite using template', () => {
    test('template as querystring parameters on GET', async () => {
      const sent = await send('test10.test', '/requests/user1/foo/user2/bar?q1=20', { headers: form, body: 'hello=world' });
      assert.equal(sent.query.get('uri_param1'), 'foo');
      assert.equal(sent.rawQuery, 'q1=20&uri_param1=foo&uri_param2%5Bsome_index%5D%5B1%5D=bar');
    });
    test('should update request path using hash', async () => {
      const sent = await send('test11.test', '/requests/user1/foo/user2/bar');
      assert.equal(sent.path, '/requests/user2/bar/user1/foo');
    });
    test('should not add querystring if hash missing (the `or` default)', async () => {
      const sent = await send('test12.test', '/requests/?q1=20');
      assert.equal(sent.query.get('q1'), '20');
      assert.equal(sent.query.get('uri_param1'), 'default1');
      assert.equal(sent.query.get('uri_param2'), 'default2');
    });
    test('should not fail when uri template rendered using index', async () => {
      const sent = await send('test14.test', '/user1/foo/user2/bar');
      assert.equal(sent.path, '/requests/user1/foo/user2/bar');
    });
    test('validate using headers/req_querystring for rendering templates', async () => {
      const sent = await send('test15.test', '/requests/user1/foo/user2/bar?q1=20', { headers: form });
      assert.equal(sent.query.get('q1'), null);
      assert.equal(sent.query.get('uri_param1'), 'foo');
      assert.equal(sent.query.get('uri_param2'), 'test15.test');
      assert.equal(sent.headers['x-test-header'], '20');
    });
    test('validate that removed header can be used as template', async () => {
      const sent = await send('test16.test', '/requests/user1/foo/user2/bar?q2=20', { headers: { 'x-remove-header': 'its a test' } });
      assert.equal(sent.headers['x-remove-header'], undefined);
      assert.equal(sent.query.get('q1'), 'foo');
      assert.equal(sent.query.get('q2'), 'its a test');
      assert.equal(sent.headers['x-test-header'], 'its a test');
    });
    test('validate template will be rendered with old value of replaced header', async () => {
      const sent = await send('test17.test', '/requests/user1/foo/user2/bar?q2=20', { headers: { 'x-replace-header': 'the old value' } });
      assert.equal(sent.query.get('q1'), 'foo');
      assert.equal(sent.query.get('q2'), 'the old value');
      assert.equal(sent.headers['x-test-header'], 'the old value');
      assert.equal(sent.headers['x-replace-header'], 'the new value');
    });
    test('validate template can be escaped', async () => {
      const sent = await send('test18.test', '/requests/user1/foo/user2/bar?q2=20');
      assert.equal(sent.query.get('q1'), '$(uri_captures.user1)');
      assert.equal(sent.query.get('q2'), '20');
    });
  });

  describe('remove then add header (regression test)', () => {
    test('header already exists in request', async () => {
      const sent = await send('test22.test', '/request', { headers: { authorization: 'Basic dGVzdDp0ZXN0' } });
      assert.equal(sent.headers.authorization, 'Basic test');
      assert.equal(sent.method, 'POST');
    });
    test('header does not exist in request', async () => {
      const sent = await send('test22.test', '/request');
      assert.equal(sent.headers.authorization, 'Basic test');
    });
  });

  test('query parameters are not urlencoded to upstream URL when the plugin changes none', async () => {
    const sent = await send('test23.test', '/request?expr=a:b,c/d');
    assert.equal(sent.rawQuery, 'expr=a:b,c/d');
  });
});

describe('request-transformer (schema)', () => {
  const check = (config: Record<string, unknown>) => pluginConfigErrors('request-transformer', config);
  test('validates http_method', async () => assert.deepEqual(await check({ http_method: 'GET' }), []));
  test('errors invalid http_method', async () => assert.deepEqual(await check({ http_method: 'HELLO!' }), ['config.http_method: invalid value: HELLO!']));
  test('validate regex pattern as value', async () => assert.deepEqual(await check({ add: { querystring: ['uri_param1:$(uri_captures.user1)', 'uri_param2:$(uri_captures.user2 or "default")'] } }), []));
  test('validate string as value', async () => assert.deepEqual(await check({ add: { querystring: ['uri_param1:$(uri_captures.user1)', 'uri_param2:value'] } }), []));
  test('error for missing value', async () => {
    assert.deepEqual(await check({ add: { querystring: ['uri_param2:'] } }), ["config.add.querystring[0]: key 'uri_param2' has no value"]);
  });
  test('error for malformed headers', async () => {
    assert.deepEqual(await check({ add: { headers: ['bad header:v'] } }), ["config.add.headers[0]: 'bad header' is not a valid header"]);
    assert.deepEqual(await check({ rename: { headers: ['a:bad header'] } }), ["config.rename.headers[0]: 'bad header' is not a valid header"]);
  });
  test('Lua expressions beyond references are refused when the file loads', async () => {
    const errors = await check({ replace: { uri: '/requests/user2/$(10 * uri_captures.user1)' }, add: { querystring: ['q1:$(ERROR())'] } });
    assert.equal(errors.length, 2);
    assert.match(errors[0], /^config\.replace\.uri: value '.*' is not in supported format, error: .*only references/);
    assert.match(errors[1], /^config\.add\.querystring\[0\]: value '\$\(ERROR\(\)\)' is not in supported format/);
  });
});
