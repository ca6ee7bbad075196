/**
 * Kong's grpc-web spec (spec/03-plugins/32-grpc-web/01-proxy_spec.lua) against a real gateway, a real gRPC
 * server (@grpc/grpc-js), and an HTTP upstream that shows what it receives (`TE: trailers`): base64 text and
 * binary calls over HTTP and HTTPS with Kong's exact bodies, gRPC-Web JSON and plain JSON with the proto,
 * pass_stripped_path. Beyond Kong's spec: a failed call's status in the trailer frame, a server stream's
 * replies in one answer, the CORS preflight with allow_origin_header, the 400s for JSON without a proto
 * or an unknown method, and a client that leaves cancelling the call.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { resolve } from 'node:path';
import { describe, test } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { aroundTests, request, startGateway, startUpstream } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';

const HELLO_PROTO = resolve(import.meta.dirname, 'hello.proto');
const HELLO_REQUEST_TEXT_BODY = 'AAAAAAYKBGhleWE=';
const HELLO_REQUEST_BODY = Buffer.from(HELLO_REQUEST_TEXT_BODY, 'base64');
// Kong's spec expects grpcbin's trailer, which has an empty grpc-message; grpc-js sends `OK` on success, and
// the trailer frame carries what the upstream sent.
const OK_TRAILER = 'grpc-status:0\r\ngrpc-message:OK\r\n';
const HELLO_REPLY_TEXT = 'AAAAAAwKCmhlbGxvIGhleWE=';

/** Waits until `condition` holds, polling; the test's timeout bounds it. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setTimeout(r, 20));
}

/** One gRPC-Web frame: flag byte, big-endian length, payload. */
function webFrame(payload: string | Buffer, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(Buffer.byteLength(payload), 1);
  return Buffer.concat([head, Buffer.from(payload)]);
}

const HELLO_RESPONSE_TEXT_BODY = HELLO_REPLY_TEXT + webFrame(OK_TRAILER, 0x80).toString('base64');
const HELLO_RESPONSE_BODY = Buffer.concat([Buffer.from(HELLO_REPLY_TEXT, 'base64'), webFrame(OK_TRAILER, 0x80)]);

interface HelloServer {
  port: number;
  /** The greetings of the Hang calls the server saw start, and those it saw cancelled. */
  hanging: string[];
  cancelled: string[];
  close(): Promise<void>;
}

async function startHelloServer(): Promise<HelloServer> {
  const hanging: string[] = [];
  const cancelled: string[] = [];
  const proto = grpc.loadPackageDefinition(protoLoader.loadSync(HELLO_PROTO, { keepCase: true, defaults: true })) as any;
  const server = new grpc.Server();
  server.addService(proto.hello.HelloService.service, {
    SayHello: (call: any, done: grpc.sendUnaryData<unknown>) => done(null, { reply: `hello ${call.request.greeting}` }),
    LotsOfReplies: (call: any) => {
      for (let i = 0; i < call.request.count; i++) call.write({ reply: `hello ${call.request.greeting} ${i}` });
      if (call.request.fail_code) call.emit('error', { code: call.request.fail_code, details: 'no more' });
      else call.end();
    },
    Hang: (call: any) => {
      hanging.push(call.request.greeting);
      call.on('cancelled', () => cancelled.push(call.request.greeting));
    },
  });
  const port = await new Promise<number>((done, fail) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? fail(err) : done(p))));
  return { port, hanging, cancelled, close: async () => server.forceShutdown() };
}

describe('grpc-web (proxy)', () => {
  const started = aroundTests(async () => {
    const hello = await startHelloServer();
    const mock = await startUpstream();
    const url = `grpc://127.0.0.1:${hello.port}`;
    const gw = await startGateway({
      _format_version: '3.0',
      services: [
        {
          name: 'grpc',
          url,
          routes: [
            { name: 'r1', protocols: ['http', 'https'], paths: ['/'], plugins: [{ name: 'grpc-web', config: { proto: HELLO_PROTO } }] },
            { name: 'r2', protocols: ['http', 'https'], paths: ['/prefix'], plugins: [{ name: 'grpc-web', config: { proto: HELLO_PROTO, pass_stripped_path: true } }] },
            { name: 'no-proto', hosts: ['no-proto.test'], paths: ['/'], plugins: [{ name: 'grpc-web', config: { allow_origin_header: 'https://app.example' } }] },
          ],
        },
        { name: 'mock', url: mock.url, routes: [{ name: 'mock', hosts: ['grpc_mock.example'], preserve_host: true, plugins: [{ name: 'grpc-web' }] }] },
      ],
    });
    return { gw, hello, mock, close: async () => (await gw.stop(), await hello.close(), await mock.close()) };
  });
  const call = (base: 'http' | 'https', path: string, contentType: string, body: string | Buffer, host?: string) =>
    request(`${started.gw[base]}${path}`, { method: 'POST', body, headers: { 'content-type': contentType, ...(host ? { host } : {}) } });

  for (const te of [undefined, 'chunked']) {
    test(`sets 'TE: trailers' upstream${te ? ', ignoring the client’s TE' : ''}`, async () => {
      const res = await request(`${started.gw.http}/`, { method: 'POST', body: '', headers: { host: 'grpc_mock.example', 'content-type': 'application/grpc-web-text', ...(te ? { te } : {}) } });
      assert.equal(res.status, 200);
      assert.equal(started.mock.requests.at(-1)!.headers.te, 'trailers');
      assert.equal(started.mock.requests.at(-1)!.headers['content-type'], 'application/grpc');
    });
  }

  for (const base of ['http', 'https'] as const) {
    test(`Call gRPC-base64 via ${base.toUpperCase()}`, async () => {
      const res = await call(base, '/hello.HelloService/SayHello', 'application/grpc-web-text', HELLO_REQUEST_TEXT_BODY);
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/grpc-web-text');
      assert.equal(res.headers['access-control-allow-origin'], '*');
      assert.equal(res.text, HELLO_RESPONSE_TEXT_BODY);
    });

    test(`Call binary gRPC via ${base.toUpperCase()}`, async () => {
      const res = await call(base, '/hello.HelloService/SayHello', 'application/grpc-web+proto', HELLO_REQUEST_BODY);
      assert.equal(res.headers['content-type'], 'application/grpc-web+proto');
      assert.deepEqual(res.body, HELLO_RESPONSE_BODY);
    });
  }

  test('binary gRPC needs no proto', async () => {
    const res = await call('http', '/hello.HelloService/SayHello', 'application/grpc-web', HELLO_REQUEST_BODY, 'no-proto.test');
    assert.deepEqual(res.body, HELLO_RESPONSE_BODY);
    assert.equal(res.headers['access-control-allow-origin'], 'https://app.example');
  });

  test('Call gRPC-Web JSON via HTTP', async () => {
    const res = await call('http', '/hello.HelloService/SayHello', 'application/grpc-web+json', webFrame(JSON.stringify({ greeting: 'heya' })));
    assert.deepEqual(res.body, Buffer.concat([webFrame(JSON.stringify({ reply: 'hello heya' })), webFrame(OK_TRAILER, 0x80)]));
  });

  test('Call plain JSON via HTTP', async () => {
    const res = await call('http', '/hello.HelloService/SayHello', 'application/json', JSON.stringify({ greeting: 'heya' }));
    assert.deepEqual(res.json(), { reply: 'hello heya' });
  });

  test('Pass stripped URI', async () => {
    const res = await call('http', '/prefix/hello.HelloService/SayHello', 'application/json', JSON.stringify({ greeting: 'heya' }));
    assert.deepEqual(res.json(), { reply: 'hello heya' });
  });

  test("a failed call's status is in the trailer frame, after the replies sent before it", async () => {
    const body = JSON.stringify({ greeting: 'x', count: 1, fail_code: 9 });
    const res = await call('http', '/hello.HelloService/LotsOfReplies', 'application/grpc-web+json', webFrame(body));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, Buffer.concat([webFrame(JSON.stringify({ reply: 'hello x 0' })), webFrame('grpc-status:9\r\ngrpc-message:no%20more\r\n', 0x80)]));
  });

  test("a server stream's replies come in one answer", async () => {
    const res = await call('http', '/hello.HelloService/LotsOfReplies', 'application/grpc-web-text+json', webFrame(JSON.stringify({ greeting: 'y', count: 2 })).toString('base64'));
    const replies = [0, 1].map((i) => webFrame(JSON.stringify({ reply: `hello y ${i}` })));
    assert.equal(res.text, Buffer.concat(replies).toString('base64') + webFrame(OK_TRAILER, 0x80).toString('base64'));
  });

  test('a client that goes away cancels the call upstream', async () => {
    const req = http.request(`${started.gw.http}/hello.HelloService/Hang`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    req.on('error', () => {});
    req.end(JSON.stringify({ greeting: 'leaving' }));
    await until(() => started.hello.hanging.includes('leaving'));
    req.destroy();
    await until(() => started.hello.cancelled.includes('leaving'));
  });

  test('a CORS preflight is answered here, with allow_origin_header', async () => {
    const res = await request(`${started.gw.http}/hello.HelloService/SayHello`, { method: 'OPTIONS', headers: { host: 'no-proto.test' } });
    assert.equal(res.status, 200);
    assert.equal(res.text, 'OK');
    assert.equal(res.headers['access-control-allow-origin'], 'https://app.example');
    assert.equal(res.headers['access-control-allow-methods'], 'POST');
    assert.equal(res.headers['access-control-allow-headers'], 'content-type,x-grpc-web,x-user-agent');
    assert.equal(res.headers['content-type'], 'application/grpc-web-text+proto');
  });

  test('JSON needs the proto, and a method it declares', async () => {
    const noProto = await call('http', '/hello.HelloService/SayHello', 'application/json', '{}', 'no-proto.test');
    assert.equal(noProto.status, 400);
    assert.equal(noProto.text, 'transcoding requests require a .proto file defining the service');
    const unknown = await call('http', '/hello.HelloService/Nope', 'application/json', '{}');
    assert.equal(unknown.status, 400);
    assert.equal(unknown.text, 'Unknown path "/hello.HelloService/Nope"');
  });

  test('JSON that does not parse is a 400', async () => {
    const res = await call('http', '/hello.HelloService/SayHello', 'application/json', '{"greeting":');
    assert.equal(res.status, 400);
    assert.match(res.text, /^cannot transcode the request: /);
  });
});

describe('grpc-web (schema)', () => {
  test("Kong's defaults, and a proto that does not load is the config error", async () => {
    assert.deepEqual(await pluginConfigErrors('grpc-web', {}), []);
    assert.deepEqual(await pluginConfigErrors('grpc-web', { proto: HELLO_PROTO, pass_stripped_path: true, allow_origin_header: 'https://a.example' }), []);
    const [missing] = await pluginConfigErrors('grpc-web', { proto: '/nonexistent/hello.proto' });
    assert.match(missing, /^config\.proto: cannot load /);
  });
});
