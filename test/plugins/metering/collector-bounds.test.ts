/**
 * A collector mapping's time and output are bounded whatever a client posts (issue 28, item 4): a
 * regular expression over a client's field runs in linear time (`(a|aa)+$` held the event loop for
 * seconds, doubling every few characters); a single evaluation step that runs long (`$distinct` of
 * 100,000 items) is stopped at its budget while the gateway answers others; a mapping that makes a
 * huge value (`$pad` to 50 million characters from a 26-byte body) is refused, nothing stored. The
 * gateway runs as a child process, so that a pinned gateway fails these tests instead of the runner. A
 * mapping that exhausts memory (a 400 MB string) ends its own process, the gateway answering on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { spawnGateway, type SpawnedGateway } from '../../helpers/gateway.ts';
import { meteringConfig, MeteringApi, type Reply } from './catalogue-support.ts';

/** A field a backtracking engine needs exponential time for against `(a|aa)+$`. */
const OVERLAPPING = 'a'.repeat(64) + '!';

describe('collector mappings are bounded', { timeout: 120_000 }, () => {
  let gw: SpawnedGateway;
  let api: MeteringApi;
  before(async () => {
    // A budget long enough that the gateway must answer others while an evaluation uses it up.
    const config: Record<string, any> = meteringConfig({ metering: { collector_timeout_ms: 1000 } });
    config.collectors = [
      { name: 'tags', match: { type: 'tagged' }, mapping: '$merge([$, {"data": {"repeats": $count($match(data.tag, /(a|aa)+$/))}}])' },
      { name: 'split', match: { type: 'split' }, mapping: '$merge([$, {"data": {"parts": $count($split(data.tag, /(a|a?)+$/))}}])' },
      { name: 'padded', mapping: '{"type": "padded", "subject": "s", "data": {"text": $pad("x", n)}}' },
      { name: 'distinct', mapping: '{"type": "distinct", "subject": "s", "data": {"count": $count($distinct([1..100000]))}}' },
    ];
    gw = await spawnGateway(config);
    api = await MeteringApi.connect(gw.https);
  });
  after(() => gw.kill('SIGKILL'));

  /** Sends `attack`, then another request: the other must be answered; returns both answers, in the order they came. */
  async function attackWhileServing(attack: () => Promise<Reply>): Promise<{ attacked: Reply; order: string[] }> {
    const order: string[] = [];
    const attacked = attack().then((reply) => (order.push('attack'), reply));
    const alive = await api.send('GET', '/meters');
    order.push('other');
    assert.equal(alive.status, 200, 'another request is answered meanwhile');
    return { attacked: await attacked, order };
  }

  for (const [type, pattern] of [['tagged', '(a|aa)+$'], ['split', '(a|a?)+$']]) {
    test(`a regular expression over a client's field runs in linear time: ${pattern}`, async () => {
      const { attacked } = await attackWhileServing(() => api.ingest({ specversion: '1.0', id: `re-${type}`, source: 'app', type, subject: 's', data: { tag: OVERLAPPING } }));
      assert.equal(attacked.status, 202, attacked.text);
    });
  }

  test('one long evaluation step is stopped at its budget, the gateway answering others meanwhile', async () => {
    const { attacked, order } = await attackWhileServing(() => api.sendJson('POST', '/collectors/distinct/events', {}));
    assert.equal(attacked.status, 400, attacked.text);
    assert.equal(attacked.json().invalid_parameters[0].rule, 'COLLECTOR_TIMEOUT');
    assert.deepEqual(order, ['other', 'attack'], 'the other request was answered while the evaluation ran');
  });

  test('a mapping that makes a value larger than an event may be is refused, nothing stored', async () => {
    // The body: 26 bytes asking for 50 million characters. Building them may take longer than the
    // budget on a busy machine: refused either way, by its size or by its time.
    const { attacked } = await attackWhileServing(() => api.sendJson('POST', '/collectors/padded/events', { n: 50_000_000 }));
    assert.equal(attacked.status, 400, attacked.text);
    assert.match(attacked.json().invalid_parameters[0].rule, /^COLLECTOR_(TOO_LARGE|TIMEOUT)$/);
    // Two million characters are made well within the budget: refused by the size of the event.
    const twoMegabytes = await api.sendJson('POST', '/collectors/padded/events', { n: 2_000_000 });
    assert.equal(twoMegabytes.status, 400, twoMegabytes.text);
    assert.equal(twoMegabytes.json().invalid_parameters[0].rule, 'COLLECTOR_TOO_LARGE');
    assert.match(twoMegabytes.json().detail, /the mapping yields an event of 2000\d+ bytes at \[0\], more than 1048576/);
    assert.deepEqual(await api.listAllEvents({ type: 'padded' }), [], 'nothing of either request is stored');
    // The worker is replaced as needed: the same collector with a small value goes through.
    const small = await api.sendJson('POST', '/collectors/padded/events', { n: 10 });
    assert.equal(small.status, 202, small.text);
  });
});

describe('a mapping that exhausts its memory', { timeout: 120_000 }, () => {
  let gw: SpawnedGateway;
  let api: MeteringApi;
  before(async () => {
    // A budget long enough for the heap to run out first.
    const config: Record<string, any> = meteringConfig({ metering: { collector_timeout_ms: 10_000 } });
    config.collectors = [{ name: 'padded', mapping: '{"type": "padded", "subject": "s", "data": {"text": $pad("x", n)}}' }];
    gw = await spawnGateway(config);
    api = await MeteringApi.connect(gw.https);
  });
  after(() => gw.kill('SIGKILL'));

  test('ends the process it runs in, not the gateway', async () => {
    const attacked = await api.sendJson('POST', '/collectors/padded/events', { n: 400_000_000 });
    assert.equal(attacked.status, 400, attacked.text);
    assert.equal(attacked.json().invalid_parameters[0].rule, 'COLLECTOR_TOO_LARGE');
    assert.match(attacked.json().detail, /needs more memory than it may use/);
    assert.equal((await api.send('GET', '/meters')).status, 200, 'the gateway is still up');
    assert.equal((await api.sendJson('POST', '/collectors/padded/events', { n: 10 })).status, 202);
  });
});
