/**
 * The console in headless Chromium, against a real gateway with traffic, consumers, metered events and
 * a subscription: the usage chart draws the events the test posted (bars read back from a screenshot
 * of the chart's canvas: two bars, 3 to 1, none for a subject without events), in the chosen time zone,
 * grouped by dimension or customer (usage of no customer's subjects as a group of its own); live request rates and error ratios; consumers and credentials
 * without secrets; customers, subscriptions, invoices; the metering queue; request metering's dead
 * letters, re-delivered and deleted from the page. Markup in subjects, consumer names, customer names,
 * dimension values and an endpoint's reason shows as text. Every page runs without a console error
 * (a Content-Security-Policy violation is one). Without /usr/bin/chromium the cases skip.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { PNG } from 'pngjs';
import { request, spawnGateway, startGateway, startUpstream, TEST_WORKERS, type SpawnedGateway, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const NO_CHROMIUM = 'chromium not installed: apt-get install chromium';
const haveChromium = existsSync(CHROMIUM);

const SECRET = `never-show-${randomUUID()}`;
const KEY_AUTH_KEY = `key-never-shown-${randomUUID()}`;
const BASIC_PASSWORD = `password-never-shown-${randomUUID()}`;
const JWT_SECRET = `jwt-never-shown-${randomUUID()}`;
const HMAC_SECRET = 'console-hmac-secret-never-shown';
const CHART_SUBJECT = 'chart-subject';
const MARKUP_SUBJECT = '<img src=x onerror=window.__pwned=1>';
const MARKUP_DIMENSION = '<b>bold</b>';
const MARKUP_CONSUMER = '<img src=x onerror=window.__pwned=2>';
const MARKUP_CUSTOMER = '<script>window.__pwned=3</script>';
const MARKUP_REASON = '<img src=x onerror=window.__pwned=4> is not a known subject';
/** The first series' colour in the page's palette (chart.js), as the canvas paints it. */
const SERIES_RGB = [0x25, 0x63, 0xeb];
const DAY = 86_400_000;

function config(upstreamUrl: string, ingestEndpoint: string): Record<string, any> {
  const billed = {
    name: 'metering-and-billing',
    config: {
      ingest_endpoint: ingestEndpoint,
      api_token: 'token',
      subject: { look_up_value_in: 'header', field: 'x-subject' },
      queue: { max_coalescing_delay: 0, initial_retry_delay: 0.05 },
    },
  };
  return {
    services: [
      { name: 'shop', url: upstreamUrl, routes: [{ name: 'shop', paths: ['/shop'] }] },
      { name: 'billed', url: upstreamUrl, routes: [{ name: 'billed', paths: ['/billed'], plugins: [billed] }] },
    ],
    routes: [{ name: 'metering', paths: ['/v3/metering'], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
    consumers: [
      {
        username: 'acme',
        custom_id: 'cust-42',
        oauth2_credentials: [{ name: 'Acme Billing App', client_id: 'acme-app', client_secret: SECRET, redirect_uris: ['https://acme.example/cb'] }],
      },
      { username: 'key-only', keyauth_credentials: [{ key: KEY_AUTH_KEY }] },
      {
        username: 'many-kinds',
        keyauth_credentials: [{ key: `${KEY_AUTH_KEY}-2` }, { key: `${KEY_AUTH_KEY}-3` }],
        basicauth_credentials: [{ username: 'many', password: BASIC_PASSWORD }],
        jwt_secrets: [{ key: 'many-iss', secret: JWT_SECRET }],
        hmacauth_credentials: [{ username: 'many-signer', secret: HMAC_SECRET }],
        acls: [{ group: 'admins' }, { group: 'billing' }],
      },
    ],
    meters: [{ key: 'api_calls', name: 'API calls', event_type: 'request', aggregation: 'count', dimensions: { route: '$.route' } }],
    features: [{ key: 'api_calls', name: 'API calls', meter: { key: 'api_calls' } }],
    plans: [
      {
        key: 'starter',
        name: 'Starter',
        currency: 'USD',
        billing_cadence: 'P1M',
        phases: [
          {
            key: 'main',
            name: 'Main',
            duration: null,
            rate_cards: [
              { key: 'base_fee', name: 'Base fee', price: { type: 'flat', amount: '9' }, payment_term: 'in_advance', billing_cadence: 'P1M' },
              { key: 'api_calls', name: 'API calls', feature_key: 'api_calls', price: { type: 'unit', amount: '0.01' }, entitlement: { type: 'metered', limit: '5000', usage_period: 'P1M' } },
            ],
          },
        ],
      },
    ],
    customers: [
      { key: 'acme-corp', name: 'Acme Corp', usage_attribution: { subject_keys: ['acme'] }, currency: 'USD' },
      { key: 'markup-corp', name: MARKUP_CUSTOMER, usage_attribution: { subject_keys: [MARKUP_SUBJECT] }, currency: 'USD' },
    ],
  };
}

function event(subject: string, time: number, route = '/orders') {
  return { specversion: '1.0', id: randomUUID(), source: 'console-test', type: 'request', subject, time: new Date(time).toISOString(), data: { route } };
}

/** 02:00 UTC two days and one day ago: 21:00 the day before in New York, so days there differ from days in UTC. */
const TODAY = Math.floor(Date.now() / DAY) * DAY;
const CHART_TIMES = [TODAY - 2 * DAY + 2 * 3_600_000, TODAY - DAY + 2 * 3_600_000];

let upstream: Upstream;
let gw: TestGateway;
let browser: Browser;

/** An ingest endpoint refusing (400, with markup in its reason) every batch with an event of a subject starting `poison`, while `refusing`. */
const ingest = { refusing: true, accepted: [] as string[], url: '', server: undefined as http.Server | undefined };

async function startIngest(): Promise<void> {
  ingest.server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const events = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { subject: string }[];
      const poisoned = ingest.refusing && events.some((e) => e.subject.startsWith('poison'));
      if (poisoned) return void res.writeHead(400, { 'content-type': 'text/plain' }).end(MARKUP_REASON);
      ingest.accepted.push(...events.map((e) => e.subject));
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((r) => ingest.server!.listen(0, '127.0.0.1', r));
  ingest.url = `http://127.0.0.1:${(ingest.server.address() as AddressInfo).port}/events`;
}

async function post(path: string, body: unknown, type = 'application/json') {
  const reply = await request(`${gw.http}/v3/metering${path}`, { method: 'POST', headers: { 'content-type': type }, body: JSON.stringify(body) });
  assert.ok(reply.status < 300, `${path}: ${reply.status} ${reply.text}`);
  return reply;
}

/** A fresh tab on the console that records console errors and uncaught exceptions. */
async function openConsole(t: { after(fn: () => Promise<void>): void }, admin = gw.admin): Promise<{ tab: Page; errors: string[]; requested: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const tab = await context.newPage();
  const errors: string[] = [];
  const requested: string[] = [];
  tab.on('request', (r) => requested.push(new URL(r.url()).pathname));
  tab.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  tab.on('pageerror', (e) => errors.push(e.message));
  t.after(async () => {
    await context.close();
    assert.deepEqual(errors, [], 'no console errors (CSP violations included)');
  });
  await tab.goto(`${admin}/console`);
  return { tab, errors, requested };
}

interface UsageForm {
  range?: string;
  granularity?: string;
  timeZone?: string;
  groupBy?: string;
  subject?: string;
}

/** Fills the usage form, shows, and waits for the chart of exactly this query. */
async function showUsage(tab: Page, form: UsageForm): Promise<string> {
  await tab.waitForSelector('#usage-chart[data-state=drawn], #usage-chart[data-state=empty]');
  await tab.selectOption('select[name=range]', form.range ?? '7d');
  await tab.selectOption('select[name=granularity]', form.granularity ?? 'P1D');
  await tab.fill('input[name=time_zone]', form.timeZone ?? 'UTC');
  await tab.selectOption('select[name=group_by]', form.groupBy ?? '');
  await tab.fill('input[name=subject]', form.subject ?? '');
  await tab.click('#usage-form button[type=submit]');
  await tab.waitForFunction(() => ['drawn', 'empty', 'failed'].includes(document.querySelector<HTMLElement>('#usage-chart')!.dataset.state!));
  return (await tab.textContent('#usage-status')) ?? '';
}

/** The usage table as [window, group, value] rows. */
async function usageRows(tab: Page): Promise<string[][]> {
  return tab.$$eval('#usage-table tbody tr', (rows) => rows.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
}

/**
 * The bars of the first series in a screenshot of the chart's canvas: for each run of adjacent pixel
 * columns holding the series' colour, how many pixels of that colour its tallest column has.
 */
async function barHeights(tab: Page): Promise<number[]> {
  return (await bars(tab)).map((bar) => bar.height);
}

/** The bars of the first series, as barHeights measures them, with their widths in pixel columns; and the canvas's width. */
async function bars(tab: Page): Promise<{ height: number; width: number }[] & { canvasWidth?: number }> {
  const png = PNG.sync.read(await tab.locator('#usage-chart canvas').screenshot());
  const isSeries = (i: number) => SERIES_RGB.every((c, k) => Math.abs(png.data[i + k] - c) <= 24);
  const columns: number[] = [];
  for (let x = 0; x < png.width; x++) {
    let n = 0;
    for (let y = 0; y < png.height; y++) if (isSeries((y * png.width + x) * 4)) n++;
    columns.push(n);
  }
  const found: { height: number; width: number }[] & { canvasWidth?: number } = [];
  found.canvasWidth = png.width;
  let height = 0;
  let width = 0;
  for (const n of [...columns, 0]) {
    if (n > 0) {
      height = Math.max(height, n);
      width++;
    } else if (width > 0) {
      found.push({ height, width });
      height = 0;
      width = 0;
    }
  }
  return found;
}

before(async () => {
  if (haveChromium) browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
});
after(() => browser?.close());

describe('the console in headless Chromium', () => {
  before(async () => {
    upstream = await startUpstream((req, res) => res.writeHead(req.url?.includes('fail') ? 500 : 200, { 'content-type': 'application/json' }).end('{}'));
    await startIngest();
    gw = await startGateway(config(upstream.url, ingest.url));
    await post(
      '/events',
      [
        ...[0, 1, 2].map(() => event(CHART_SUBJECT, CHART_TIMES[0])),
        event(CHART_SUBJECT, CHART_TIMES[1]),
        event(MARKUP_SUBJECT, Date.now() - 3_600_000, MARKUP_DIMENSION),
      ],
      'application/cloudevents-batch+json',
    );
    await post('/subscriptions', { customer: { key: 'acme-corp' }, plan: { key: 'starter' } });
    // Usage of a subscription counts from the first whole second after it started.
    const usageAt = Date.now() + 1000;
    await post('/events', [event('acme', usageAt), event('acme', usageAt)], 'application/cloudevents-batch+json');
    // Queries end now: let those events be in the past.
    await new Promise((resolve) => setTimeout(resolve, usageAt + 100 - Date.now()));
    const consumer = await request(`${gw.admin}/consumers`, { method: 'POST', body: { username: MARKUP_CONSUMER } });
    assert.equal(consumer.status, 201, consumer.text);
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
    ingest.server?.close();
  });

  it('the usage chart draws the posted events: two bars, 3 to 1, by day in New York', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    const status = await showUsage(tab, { subject: CHART_SUBJECT, timeZone: 'America/New_York' });
    assert.match(status, /api_calls: 2 windows with usage, P1D windows in America\/New_York/);
    assert.equal(await tab.getAttribute('#usage-chart', 'data-state'), 'drawn');

    // The days of New York (02:00 UTC is the evening before there), as the page words them.
    const expectedDays = await tab.evaluate(
      (times) => times.map((t) => new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'America/New_York' }).format(new Date(t))),
      CHART_TIMES,
    );
    assert.deepEqual(await usageRows(tab), [[expectedDays[0], 'API calls', '3'], [expectedDays[1], 'API calls', '1']]);

    const bars = await barHeights(tab);
    assert.equal(bars.length, 2, `bars drawn: ${bars}`);
    assert.ok(bars[1] > 20, `the shorter bar is visible: ${bars}`);
    assert.ok(Math.abs(bars[0] / bars[1] - 3) < 0.15, `bar heights ${bars} are not 3 to 1`);

    // The same chart for a subject without events: nothing drawn, which the measure above tells apart.
    const empty = await showUsage(tab, { subject: 'nobody-sent-this', timeZone: 'America/New_York' });
    assert.match(empty, /0 windows with usage/);
    assert.equal(await tab.getAttribute('#usage-chart', 'data-state'), 'empty');
    assert.deepEqual(await barHeights(tab), []);
    assert.deepEqual(await usageRows(tab), [['No usage in this range']]);
  });

  it('the usage chart reads at a glance: the current window a bar as wide as a whole one, the table beside the chart', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    // acme's two events are in the current hour, which the query cuts short at now.
    await showUsage(tab, { subject: 'acme', range: '24h', granularity: 'PT1H' });
    assert.deepEqual((await usageRows(tab)).map(([, , value]) => value), ['2']);
    const drawn = await bars(tab);
    assert.equal(drawn.length, 1, `bars: ${JSON.stringify(drawn)}`);
    // 80 % of an hour of a range of 24 to 25 hours, over the plot (the canvas less its y axis and margins).
    const wholeWindow = (0.8 * (drawn.canvasWidth! - 80)) / 25;
    assert.ok(drawn[0].width >= 0.8 * wholeWindow, `the bar is ${drawn[0].width} px wide, a whole window ${wholeWindow.toFixed(1)} px`);
    const chartBox = (await tab.locator('#usage-chart').boundingBox())!;
    const tableBox = (await tab.locator('#usage-table').boundingBox())!;
    assert.ok(tableBox.x >= chartBox.x + chartBox.width, 'the table is right of the chart');
    assert.ok(tableBox.y < chartBox.y + chartBox.height, 'the table is beside the chart, not below it');
  });

  it('usage by dimension and by customer, in the legend and the table', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    await showUsage(tab, { groupBy: 'route' });
    const legend = () => tab.$$eval('#usage-chart .u-legend .u-series .u-label', (labels) => labels.map((l) => l.textContent));
    assert.deepEqual((await legend()).slice(1).sort(), ['/orders', MARKUP_DIMENSION].sort());
    const byRoute = new Map<string, number>();
    for (const [, group, value] of await usageRows(tab)) byRoute.set(group, (byRoute.get(group) ?? 0) + Number(value));
    assert.equal(byRoute.get('/orders'), 6, 'four chart events and two of acme');
    assert.equal(byRoute.get(MARKUP_DIMENSION), 1);

    await showUsage(tab, { groupBy: 'customer', granularity: 'PT1H', range: '24h' });
    // Subjects no customer claims (the chart's, when yesterday's event is inside the last 24 hours) are one group of their own.
    const customers = (await legend()).slice(1).filter((label) => label !== '(no customer)');
    assert.deepEqual(customers.sort(), ['Acme Corp (acme-corp)', `${MARKUP_CUSTOMER} (markup-corp)`].sort());
    const byCustomer = new Map<string, number>();
    for (const [, group, value] of await usageRows(tab)) byCustomer.set(group, (byCustomer.get(group) ?? 0) + Number(value));
    assert.equal(byCustomer.get('Acme Corp (acme-corp)'), 2);
    assert.equal(byCustomer.get(`${MARKUP_CUSTOMER} (markup-corp)`), 1);

    // Over the week: the chart subject's four events belong to no customer, and are a group of their own.
    await showUsage(tab, { groupBy: 'customer' });
    const weekByCustomer = new Map<string, number>();
    for (const [, group, value] of await usageRows(tab)) weekByCustomer.set(group, (weekByCustomer.get(group) ?? 0) + Number(value));
    assert.deepEqual(Object.fromEntries(weekByCustomer), { 'Acme Corp (acme-corp)': 2, [`${MARKUP_CUSTOMER} (markup-corp)`]: 1, '(no customer)': 4 });
  });

  it('markup in subjects, dimension values, consumer and customer names is shown as text', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    await showUsage(tab, { groupBy: 'subject', range: '24h', granularity: 'PT1H' });
    assert.ok((await usageRows(tab)).some(([, group]) => group === MARKUP_SUBJECT), 'the subject, verbatim, in the table');
    await tab.waitForSelector(`#consumers-table tr >> text=${MARKUP_CONSUMER}`);
    await tab.waitForSelector(`#customers-table tr >> text=${MARKUP_CUSTOMER}`);
    assert.equal(await tab.locator('#consumers-table td', { hasText: MARKUP_CONSUMER }).count(), 1);
    assert.equal(await tab.locator('img').count(), 0, 'no image element was made from data');
    assert.equal(await tab.locator('main b, main script').count(), 0, 'no element was made from data');
    assert.equal(await tab.evaluate(() => (window as any).__pwned), undefined, 'no script ran');
  });

  it('routes and services show live request rates and error ratios', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    await tab.waitForSelector('#routes-table tr[data-key="shop"]');
    await tab.waitForFunction(() => document.querySelector('#traffic-summary')!.textContent!.includes('since the gateway started'));
    for (let i = 0; i < 8; i++) assert.ok((await request(`${gw.http}/shop/${i % 4 === 3 ? 'fail' : 'ok'}`)).status >= 200);
    const cells = async (selector: string) => tab.$$eval(`${selector} td`, (tds) => tds.map((td) => td.textContent ?? ''));
    await tab.waitForFunction(() => [...document.querySelectorAll('#routes-table tr[data-key="shop"] td')].some((td) => td.textContent === '25.0 %'), undefined, { timeout: 15_000 });
    const route = await cells('#routes-table tr[data-key="shop"]');
    const [name, service, protocols, paths, , rate, serverErrors, clientErrors] = route;
    assert.deepEqual([name, service, protocols, paths], ['shop', 'shop', 'http, https', '/shop']);
    assert.ok(Number(rate) > 0, `req/s ${rate}`);
    assert.equal(serverErrors, '25.0 %');
    assert.equal(clientErrors, '0.0 %');
    const serviceRow = await cells('#services-table tr[data-key="shop"]');
    assert.equal(serviceRow[1], upstream.url);
    assert.equal(serviceRow[4], '25.0 %');
  });

  it('consumers with their credentials, never a client secret', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    await tab.waitForSelector('#consumers-table tr[data-key="acme"]');
    const row = (await tab.textContent('#consumers-table tr[data-key="acme"]')) ?? '';
    for (const shown of ['cust-42', 'Acme Billing App', 'acme-app', 'secret stored in plain text', 'https://acme.example/cb']) assert.ok(row.includes(shown), `${shown} in ${row}`);
    assert.ok(!(await tab.content()).includes(SECRET), 'the secret is nowhere in the page');
  });

  it('consumers count every kind of credential and show their ACL groups, never a key, password, jwt or hmac secret', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    await tab.waitForSelector('#consumers-table tr[data-key="many-kinds"]');
    const headers = await tab.$$eval('#consumers-table th', (ths) => ths.map((th) => th.textContent));
    const cellsOf = async (key: string) => {
      const cells = await tab.$$eval(`#consumers-table tr[data-key="${key}"] td`, (tds) => tds.map((td) => td.textContent ?? ''));
      return Object.fromEntries(headers.map((label, i) => [label, cells[i]]));
    };
    const keyOnly = await cellsOf('key-only');
    assert.equal(keyOnly.Credentials, '1');
    assert.equal(keyOnly.Kinds, 'key-auth 1');
    assert.equal(keyOnly['ACL groups'], '–');
    const many = await cellsOf('many-kinds');
    assert.equal(many.Credentials, '5');
    assert.equal(many.Kinds, 'key-auth 2, basic-auth 1, jwt 1, hmac-auth 1');
    assert.equal(many['ACL groups'], 'admins, billing');
    assert.equal((await cellsOf('acme')).Credentials, '1');
    const page = await tab.content();
    for (const secret of [KEY_AUTH_KEY, BASIC_PASSWORD, JWT_SECRET, HMAC_SECRET]) assert.ok(!page.includes(secret), 'no key, password, jwt or hmac secret in the page');
  });

  it('customers with their plan, subscriptions, invoices, and a customer\'s entitlements and upcoming invoice', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    const customer = tab.locator('#customers-table tr[data-key="acme-corp"]');
    await customer.waitFor();
    assert.match((await customer.textContent()) ?? '', /Acme Corp.*acme.*USD.*starter v1 \(active\)/);
    assert.match((await tab.textContent('#subscriptions-table tbody')) ?? '', /acme-corp.*starter v1.*active/);
    // The in-advance base fee is invoiced when the subscription starts.
    assert.match((await tab.textContent('#invoices-table tbody')) ?? '', /acme-corp.*issued.*9 USD/);
    await customer.click();
    await tab.waitForSelector('#customer-details-table h4 >> text=Upcoming invoice');
    const details = (await tab.textContent('#customer-details-table')) ?? '';
    assert.match(details, /api_calls.*metered.*yes/);
    assert.match(details, /5000/);
    assert.match(details, /API calls/);
  });

  it('the metering queue and backfills', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t);
    await tab.waitForSelector('#metering-status dl');
    const text = (await tab.textContent('#metering-status')) ?? '';
    assert.match(text, /Ingest queue\s*0 of 100.000 events waiting/);
    assert.match(text, /Meters\s*1/);
    assert.match(text, /No backfill running/);
  });

  it('dead letters: listed with the endpoint\'s reason as text, re-delivered and deleted from the page', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    for (const subject of ['poison-1', 'poison-2']) assert.equal((await request(`${gw.http}/billed/x`, { headers: { 'x-subject': subject } })).status, 200);
    const letters = async () => (await request(`${gw.admin}/metering-and-billing/dead-letters`)).json().data as { id: string }[];
    const [first, second] = await waitFor(letters, 'two dead letters', 10_000, (listed) => listed.length >= 2);
    const { tab } = await openConsole(t);
    const row = (id: string) => tab.locator(`#dead-letters-table tr[data-key="${id}"]`);
    await row(first.id).waitFor();
    assert.match((await tab.textContent('#dead-letters-summary')) ?? '', /2 dead letters holding 2 events/);
    const text = (await row(first.id).textContent()) ?? '';
    assert.ok(text.includes(MARKUP_REASON), `the reason verbatim in ${text}`);
    assert.match(text, /400.*refused by the endpoint/);
    assert.equal(await tab.locator('img').count(), 0, 'no image element was made from the reason');

    ingest.refusing = false;
    await row(first.id).getByRole('button', { name: 'Re-deliver' }).click();
    await row(first.id).waitFor({ state: 'detached', timeout: 15_000 });
    await waitFor(() => ingest.accepted.includes('poison-1'), 'the letter re-delivered to the endpoint', 10_000);

    tab.once('dialog', (dialog) => void dialog.accept());
    await row(second.id).getByRole('button', { name: 'Delete' }).click();
    await row(second.id).waitFor({ state: 'detached', timeout: 15_000 });
    await tab.waitForFunction(() => document.querySelector('#dead-letters-summary')!.textContent === 'No dead letters.', undefined, { timeout: 15_000 });
    assert.deepEqual(await letters(), []);
    assert.ok(!ingest.accepted.includes('poison-2'), 'a deleted letter is never delivered');
    assert.equal(await tab.evaluate(() => (window as any).__pwned), undefined, 'no script ran');
  });
});

/** The pixels of a screenshot of `selector`'s canvas that have colour `rgb`: how many rows apart the highest and lowest are. */
async function verticalExtent(tab: Page, selector: string, rgb: number[]): Promise<number> {
  const png = PNG.sync.read(await tab.locator(`${selector} canvas`).screenshot());
  let top = Infinity;
  let bottom = -Infinity;
  for (let y = 0; y < png.height; y++) {
    for (let x = 0; x < png.width; x++) {
      const i = (y * png.width + x) * 4;
      if (!rgb.every((c, k) => Math.abs(png.data[i + k] - c) <= 24)) continue;
      top = Math.min(top, y);
      bottom = Math.max(bottom, y);
    }
  }
  return bottom >= top ? bottom - top : 0;
}

/** The traffic chart's line colours (chart.js's palette, as traffic.js picks them). */
const LINE_RGB = { '2xx': [0x16, 0xa3, 0x4a], '4xx': [0xd9, 0x77, 0x06], '5xx': [0xdc, 0x26, 0x26] };

describe('the console of a node of two workers without a metering route', () => {
  let node: SpawnedGateway;
  let plainUpstream: Upstream;
  before(async () => {
    plainUpstream = await startUpstream();
    node = await spawnGateway({
      gateway: { worker_processes: 2, access_log: false },
      services: [{ name: 'plain', url: plainUpstream.url, routes: [{ name: 'plain', paths: ['/plain'] }] }],
    });
    // Traffic before any page is open: 6 answered by the upstream, 3 that match no route (404).
    for (let i = 0; i < 6; i++) assert.equal((await request(`${node.http}/plain/${i}`)).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await request(`${node.http}/nowhere/${i}`)).status, 404);
  });
  after(async () => {
    node?.kill();
    await node?.exited;
    await plainUpstream?.close();
  });

  it('the traffic chart shows the node\'s history from before the page opened, summed over its workers, with 2xx, 4xx and 5xx lines', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t, node.admin);
    await tab.waitForSelector('#traffic-chart[data-state=drawn]');
    const summary = (await tab.textContent('#traffic-history-summary')) ?? '';
    assert.match(summary, /last hour, by 10 s, summed over the node's 2 processes: 9 requests, 6 2xx, 0 3xx, 3 4xx, 0 5xx/);
    const legend = await tab.$$eval('#traffic-chart .u-legend .u-series .u-label', (labels) => labels.map((l) => l.textContent));
    assert.deepEqual(legend.slice(1), ['success (2xx)', 'client errors (4xx)', 'server errors (5xx)']);
    // The 2xx and 4xx lines rise above the axis where the requests were; the 5xx line stays on it.
    const extents = { '2xx': 0, '4xx': 0, '5xx': 0 };
    for (const status of ['2xx', '4xx', '5xx'] as const) extents[status] = await verticalExtent(tab, '#traffic-chart', LINE_RGB[status]);
    assert.ok(extents['2xx'] > 20 && extents['4xx'] > 20, `2xx and 4xx lines rise: ${JSON.stringify(extents)}`);
    assert.ok(extents['5xx'] < 5, `the 5xx line is flat: ${JSON.stringify(extents)}`);
    // The route's sparkline and counts are the node's too; the unmatched requests are no route's.
    await tab.waitForSelector('#route-sparklines tr[data-key="plain"]');
    const sparklineRows = await tab.$$eval('#route-sparklines tbody tr', (rows) => rows.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    assert.deepEqual(sparklineRows, [['plain', '', '6', '6', '0', '0']]);
    assert.ok((await pixelsOf(tab, '#route-sparklines tr[data-key="plain"] svg', LINE_RGB['2xx'])) > 0, 'its 2xx bars drawn');

    await tab.selectOption('#traffic-range', 'day');
    await tab.waitForFunction(() => document.querySelector('#traffic-history-summary')!.textContent!.startsWith('last day'));
    assert.match((await tab.textContent('#traffic-history-summary')) ?? '', /by 60 s, .*: 9 requests, 6 2xx, 0 3xx, 3 4xx, 0 5xx/);
  });

  it('shows no metering tabs and never asks for /metering/status', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab, requested } = await openConsole(t, node.admin);
    await tab.waitForSelector('#routes-table tr[data-key="plain"]');
    // The traffic section has read its counters again (every 2 s): the metering section, had it started, would have asked by now.
    await tab.waitForFunction(() => performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/status/traffic')).length >= 3, undefined, { timeout: 15_000 });
    const visibleTabs = await tab.$$eval('header nav a', (links) => links.filter((a) => !(a as HTMLElement).hidden).map((a) => a.textContent));
    assert.deepEqual(visibleTabs, ['Traffic', 'Consumers', 'Dead letters']);
    for (const section of ['#usage', '#billing', '#metering']) assert.equal(await tab.isVisible(section), false, `${section} hidden`);
    assert.deepEqual(requested.filter((path) => path.startsWith('/metering/')), [], 'no metering request');
  });
});

/** How many pixels of colour `rgb` a screenshot of `selector` holds. */
async function pixelsOf(tab: Page, selector: string, rgb: number[]): Promise<number> {
  const png = PNG.sync.read(await tab.locator(selector).screenshot());
  let n = 0;
  for (let i = 0; i < png.data.length; i += 4) if (rgb.every((c, k) => Math.abs(png.data[i + k] - c) <= 24)) n++;
  return n;
}

/** A sparkline's height in pixels (chart.js), the height of a bar of the largest bucket. */
const SPARKLINE_HEIGHT = 32;

describe('per-route sparklines of the last hour (on a node of TOLLGATE_TEST_WORKERS processes too)', () => {
  let node: TestGateway;
  let statusUpstream: Upstream;
  /** Each route's requests by the status the upstream answers (the path's last segment). */
  const traffic = { orders: [200, 200, 200, 200, 404, 404, 500], search: [200, 200, 503] };

  before(async () => {
    statusUpstream = await startUpstream((req, res) => res.writeHead(Number(req.url!.split('/').pop())).end());
    node = await startGateway({
      services: [{ name: 'shop', url: statusUpstream.url, routes: [{ name: 'orders', paths: ['/orders'] }, { name: 'search', paths: ['/search'] }] }],
    });
    for (const [route, statuses] of Object.entries(traffic)) {
      for (const status of statuses) assert.equal((await request(`${node.http}/${route}/${status}`)).status, status);
    }
    // Requests no route matches count for the node, under no route.
    for (let i = 0; i < 3; i++) assert.equal((await request(`${node.http}/nowhere/${i}`)).status, 404);
  });
  after(async () => {
    await node?.stop();
    await statusUpstream?.close();
  });

  it('each route: its hour as stacked bars on one scale, its requests, 2xx, 4xx and 5xx beside it', async (t) => {
    if (!haveChromium) return t.skip(NO_CHROMIUM);
    const { tab } = await openConsole(t, node.admin);
    await tab.waitForSelector('#route-sparklines tr[data-key="search"] svg');
    const processes = Math.max(TEST_WORKERS, 1);
    assert.match((await tab.textContent('#traffic-history-summary')) ?? '', new RegExp(`summed over the node's ${processes} process(es)?: 13 requests, 6 2xx, 0 3xx, 5 4xx, 2 5xx`));
    const cells = (key: string) => tab.$$eval(`#route-sparklines tr[data-key="${key}"] td`, (tds) => tds.map((td) => td.textContent ?? ''));
    const headers = await tab.$$eval('#route-sparklines th', (ths) => ths.map((th) => th.textContent));
    assert.deepEqual(headers, ['Route', 'Last hour', 'requests', '2xx', '4xx', '5xx']);
    assert.deepEqual(await cells('orders'), ['orders', '', '7', '4', '2', '1']);
    assert.deepEqual(await cells('search'), ['search', '', '3', '2', '0', '1']);
    assert.equal(await tab.locator('#route-sparklines tbody tr').count(), 2, 'a row per configured route; none for unmatched requests');

    // The scale: a full-height bar is the largest bucket of any route (all of orders', unless its requests straddled two buckets).
    const full = Number(/a full-height bar is (\d+) requests? in 10 s/.exec((await tab.textContent('#route-sparklines-summary')) ?? '')?.[1]);
    assert.ok(full >= 4 && full <= 7, `the largest bucket: ${full}`);
    // Each class's bars are its count's share of that scale (to a pixel per bucket, the requests being in one or two buckets).
    const expected = { orders: { '2xx': 4, '4xx': 2, '5xx': 1 }, search: { '2xx': 2, '4xx': 0, '5xx': 1 } };
    for (const [route, counts] of Object.entries(expected)) {
      const line = `#route-sparklines tr[data-key="${route}"] svg`;
      const box = (await tab.locator(line).boundingBox())!;
      assert.equal(box.width, 360, 'a pixel column per 10 s of the hour');
      for (const [status, count] of Object.entries(counts)) {
        const pixels = await pixelsOf(tab, line, LINE_RGB[status as keyof typeof LINE_RGB]);
        const height = (count * SPARKLINE_HEIGHT) / full;
        assert.ok(Math.abs(pixels - height) <= 2, `${route} ${status}: ${pixels} px of bars, ${height.toFixed(1)} expected`);
      }
    }
    // The counts sit beside the sparkline, on its row.
    const sparkBox = (await tab.locator('#route-sparklines tr[data-key="orders"] svg').boundingBox())!;
    const countBox = (await tab.locator('#route-sparklines tr[data-key="orders"] td').nth(2).boundingBox())!;
    assert.ok(countBox.x >= sparkBox.x + sparkBox.width, 'the requests right of the sparkline');
    assert.ok(countBox.y < sparkBox.y + sparkBox.height && sparkBox.y < countBox.y + countBox.height, 'on the same row');
  });
});
