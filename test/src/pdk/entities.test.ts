/** Kong's paging of admin listings, as the PDK gives it to plugins' entity APIs. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { page, pageSize, type AdminRequest } from '../../../src/pdk/index.ts';

const request = (query: string): AdminRequest => ({ params: {}, query: new URLSearchParams(query), body: {}, headers: {} });
const items = Array.from({ length: 5 }, (_, i) => ({ id: `e${i}`, tags: i % 2 ? ['odd'] : ['even'] }));

test('size is 100 when absent, else an integer from 1 to 1000', () => {
  assert.equal(pageSize(new URLSearchParams()), 100);
  assert.equal(pageSize(new URLSearchParams('size=2')), 2);
  for (const size of ['0', '1001', '1.5', 'x']) assert.throws(() => pageSize(new URLSearchParams(`size=${size}`)), { status: 400 });
});

test('pages follow each other through the offset of the next link, and end with next: null', () => {
  const seen: string[] = [];
  let query = 'size=2';
  for (;;) {
    const body = page(items, request(query), '/things').body as { data: { id: string }[]; next: string | null };
    seen.push(...body.data.map((item) => item.id));
    if (body.next === null) break;
    query = body.next.split('?')[1];
  }
  assert.deepEqual(seen, ['e0', 'e1', 'e2', 'e3', 'e4']);
});

test('tags filter the listing, and a made-up offset is refused', () => {
  const body = page(items, request('tags=odd'), '/things').body as { data: { id: string }[] };
  assert.deepEqual(body.data.map((item) => item.id), ['e1', 'e3']);
  assert.throws(() => page(items, request('offset=!!'), '/things'), { status: 400 });
});
