/** The progress helper: a live line on a terminal (redrawn at most 10 times a second), plain lines elsewhere. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Progress } from '../../src/progress.ts';

function recorder(isTTY: boolean) {
  const writes: string[] = [];
  return { stream: { isTTY, write: (t: string) => writes.push(t) }, writes };
}

test('on a terminal: one line redrawn in place with count, percent, rate and time left, at most every 100 ms', () => {
  let clock = 0;
  const { stream, writes } = recorder(true);
  const progress = new Progress('copying events', 1000, { stream, now: () => clock });
  clock = 1000;
  progress.advance(100);
  assert.deepEqual(writes, ['\r\x1b[2Kcopying events: 100/1,000 (10%), 100/s, about 9s left']);
  clock = 1050;
  progress.advance(100);
  assert.equal(writes.length, 1, 'not redrawn within 100 ms');
  clock = 1100;
  progress.advance(100);
  assert.equal(writes.at(-1), '\r\x1b[2Kcopying events: 300/1,000 (30%), 273/s, about 3s left');
  clock = 2000;
  progress.advance(700);
  progress.finish();
  progress.finish();
  assert.equal(writes.at(-1), '\r\x1b[2Kcopying events: 1,000/1,000 (100%), done in 2s\n', 'the final line stays, once');
});

test('off a terminal: a plain line now and then, and the final one', () => {
  let clock = 0;
  const { stream, writes } = recorder(false);
  const progress = new Progress('backfill api_calls', undefined, { stream, now: () => clock, lineEveryMs: 10_000 });
  for (let i = 1; i <= 30; i++) {
    clock = i * 1000;
    progress.advance(500);
  }
  progress.setTotal(15_000);
  progress.finish();
  assert.deepEqual(writes, [
    'backfill api_calls: 500, 500/s\n',
    'backfill api_calls: 5,500, 500/s\n',
    'backfill api_calls: 10,500, 500/s\n',
    'backfill api_calls: 15,000/15,000 (100%), done in 30s\n',
  ]);
});
