/**
 * Kong's request-size-limiting catalogue (spec/03-plugins/12-request-size-limiting/01-access_spec.lua)
 * against a real gateway and upstream: bodies with a Content-Length and chunked ones, under and over the
 * limit in each unit, 417 instead of 413 for `Expect: 100-continue`, `require_content_length`'s 411, and
 * the schema's defaults and checks. Beyond Kong's spec: an oversized chunked body never reaches the
 * upstream whole, and a body a later plugin reads is held to the same limit.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';

const TEST_SIZE = 2;
const UNITS = { megabytes: 2 ** 20, kilobytes: 2 ** 10, bytes: 1 } as const;
const limiting = (config: Record<string, unknown>) => [{ name: 'request-size-limiting', config }];

describe('request-size-limiting (access)', () => {
  const started = gatewayOnEchoUpstreamAroundTests((url) => ({
    services: [
      {
        name: 'mock',
        url,
        routes: [
          { name: 'limit', hosts: ['limit.test'], plugins: limiting({ allowed_payload_size: TEST_SIZE }) },
          { name: 'required', hosts: ['required.test'], plugins: limiting({ allowed_payload_size: TEST_SIZE, require_content_length: true }) },
          ...Object.keys(UNITS).map((unit) => ({ name: `limit-${unit}`, hosts: [`limit_${unit}.test`], plugins: limiting({ allowed_payload_size: TEST_SIZE, size_unit: unit }) })),
          {
            name: 'transformed',
            hosts: ['transformed.test'],
            plugins: [...limiting({ allowed_payload_size: 10, size_unit: 'bytes' }), { name: 'request-transformer', config: { add: { body: ['added:yes'] } } }],
          },
        ],
      },
    ],
  }));

  const send = (host: string, body: string, headers: Record<string, string> = {}) =>
    request(`${started.gw.http}/request`, { method: 'POST', body, headers: { host, ...headers } });
  const chunked = (host: string, body: string, headers: Record<string, string> = {}) => send(host, body, { 'transfer-encoding': 'chunked', ...headers });

  function assertRefused(res: Reply, status: number): void {
    assert.equal(res.status, status);
    const body = res.json();
    assert.equal(body.message, 'Request size limit exceeded');
    assert.equal(typeof body.request_id, 'string', 'kong.response.error carries the request id');
  }

  describe('with Content-Length', () => {
    test('works if size is lower than limit', async () => {
      assert.equal((await send('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes))).status, 200);
    });

    test('works if size is lower than limit and Expect header', async () => {
      assert.equal((await send('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes), { expect: '100-continue' })).status, 200);
    });

    test('blocks if size is greater than limit', async () => {
      assertRefused(await send('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes + 1)), 413);
    });

    test('blocks if size is greater than limit and Expect header', async () => {
      assertRefused(await send('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes + 1), { expect: '100-continue' }), 417);
    });

    for (const [unit, factor] of Object.entries(UNITS)) {
      test(`blocks if size is greater than limit when unit in ${unit}`, async () => {
        assertRefused(await send(`limit_${unit}.test`, 'a'.repeat(TEST_SIZE * factor + 1)), 413);
      });
      test(`works if size is less than limit when unit in ${unit}`, async () => {
        assert.equal((await send(`limit_${unit}.test`, 'a'.repeat(TEST_SIZE * factor - 1))).status, 200);
      });
    }
  });

  describe('without Content-Length (chunked request body)', () => {
    test('works if size is lower than limit', async () => {
      const res = await chunked('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes));
      assert.equal(res.status, 200);
      assert.equal(res.json().body.length, TEST_SIZE * UNITS.megabytes);
    });

    test('works if size is lower than limit and Expect header', async () => {
      assert.equal((await chunked('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes), { expect: '100-continue' })).status, 200);
    });

    test('blocks if size is greater than limit, and the upstream never gets the body whole', async () => {
      const before = started.upstream.requests.length;
      assertRefused(await chunked('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes + 1)), 413);
      assert.equal(started.upstream.requests.length, before);
    });

    test('blocks if size is greater than limit and Expect header', async () => {
      assertRefused(await chunked('limit.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes + 1), { expect: '100-continue' }), 417);
    });

    test('a body far larger than the limit is refused as soon as it passes it', async () => {
      assertRefused(await chunked('limit_kilobytes.test', 'a'.repeat(8 * UNITS.megabytes)), 413);
    });

    for (const [unit, factor] of Object.entries(UNITS)) {
      test(`blocks if size is greater than limit when unit in ${unit}`, async () => {
        assertRefused(await chunked(`limit_${unit}.test`, 'a'.repeat(TEST_SIZE * factor + 1)), 413);
      });
      test(`works if size is less than limit when unit in ${unit}`, async () => {
        assert.equal((await chunked(`limit_${unit}.test`, 'a'.repeat(TEST_SIZE * factor))).status, 200);
      });
    }

    test('a later plugin reading the body is held to the limit', async () => {
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      assertRefused(await chunked('transformed.test', 'a=12345678901', form), 413);
      const res = await chunked('transformed.test', 'a=1', form);
      assert.equal(res.status, 200);
      assert.equal(res.json().body, 'a=1&added=yes');
    });
  });

  describe('Content-Length header required', () => {
    test('blocks if header is not provided', async () => {
      const res = await request(`${started.gw.http}/request`, { headers: { host: 'required.test' } });
      assert.equal(res.status, 411);
      assert.equal(res.json().message, 'A valid Content-Length header is required');
    });

    test('a chunked body is measured instead', async () => {
      assert.equal((await chunked('required.test', 'a'.repeat(100))).status, 200);
      assertRefused(await chunked('required.test', 'a'.repeat(TEST_SIZE * UNITS.megabytes + 1)), 413);
    });

    test('a declared body passes', async () => {
      assert.equal((await send('required.test', 'a'.repeat(100))).status, 200);
    });
  });
});

describe('request-size-limiting (schema)', () => {
  test('defaults load, and size_unit is one of the three units', async () => {
    assert.deepEqual(await pluginConfigErrors('request-size-limiting', {}), []);
    assert.deepEqual(await pluginConfigErrors('request-size-limiting', { size_unit: 'gigabytes' }), ['config.size_unit: expected one of: megabytes, kilobytes, bytes']);
    assert.deepEqual(await pluginConfigErrors('request-size-limiting', { allowed_payload_size: 1.5 }), ['config.allowed_payload_size: expected an integer']);
  });
});
