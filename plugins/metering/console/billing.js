/**
 * Customers, subscriptions, invoices and the latest notification events with their delivery status (the
 * admin API's read-only `/metering/customers`, …, `/metering/api/v1/notification/events`); a customer
 * chosen in the table shows what it may use now and its upcoming invoice.
 *
 * A console tab of the metering plugin (index.ts): the page loads it from
 * `/console/<build>/plugins/metering/`, so `../../` names the console's own modules.
 */
import { ApiError, every, getJson, meteringList } from '../../api.js';
import { dateTime, failure, h, list, show, table } from '../../dom.js';

const POLL_MS = 15_000;

const period = (p) => (p ? `${dateTime(p.from)} → ${dateTime(p.to)}` : '–');
const money = (amount, currency) => (amount === undefined || amount === null ? '–' : `${amount} ${currency ?? ''}`.trim());

function customerColumns(subscriptionOf) {
  return [
    { label: 'Key', cell: (c) => h('code', {}, c.key) },
    { label: 'Name', cell: (c) => c.name ?? '–' },
    { label: 'Usage subjects', cell: (c) => list(c.usage_attribution?.subject_keys?.length ? c.usage_attribution.subject_keys : [c.key]) },
    { label: 'Currency', cell: (c) => c.currency ?? '–' },
    { label: 'Plan', cell: (c) => { const s = subscriptionOf(c); return s ? `${s.plan.key} v${s.plan.version} (${s.status})` : 'no subscription'; } },
  ];
}

const subscriptionColumns = (customerKey) => [
  { label: 'Customer', cell: (s) => customerKey(s) },
  { label: 'Plan', cell: (s) => `${s.plan.key} v${s.plan.version}` },
  { label: 'Status', cell: (s) => s.status },
  { label: 'Active from', cell: (s) => dateTime(s.active_from) },
  { label: 'Active to', cell: (s) => dateTime(s.active_to) },
  { label: 'Current period', cell: (s) => period(s.current_period) },
];

const invoiceColumns = [
  { label: 'Number', cell: (i) => i.number ?? '–' },
  { label: 'Customer', cell: (i) => i.customer.key },
  { label: 'Status', cell: (i) => i.status },
  { label: 'Period', cell: (i) => period(i.period) },
  { label: 'Issued', cell: (i) => dateTime(i.issued_at) },
  { label: 'Total', numeric: true, cell: (i) => money(i.totals.total, i.currency) },
];

/** The most recent notification events shown. */
const NOTIFICATIONS_SHOWN = 50;

const notificationColumns = [
  { label: 'Created', cell: (e) => dateTime(e.createdAt) },
  { label: 'Type', cell: (e) => e.type },
  { label: 'Rule', cell: (e) => e.rule.name },
  { label: 'About', cell: (e) => aboutOf(e.payload) },
  { label: 'Delivery', cell: (e) => list(e.deliveryStatus.map((s) => `${s.state}${s.attempts.length > 1 ? ` after ${s.attempts.length} attempts` : ''}: ${s.reason}`)) },
];

function aboutOf(payload) {
  const d = payload.data;
  if (payload.type === 'entitlements.balance.threshold') return `${d.customer?.key} ${d.feature.key}: ${d.threshold.value}${['usage_percentage', 'PERCENT'].includes(d.threshold.type) ? ' %' : ''} (usage ${d.value.usage})`;
  if (payload.type === 'entitlements.reset') return `${d.customer?.key} ${d.feature.key}: reset`;
  return `${d.number ?? d.id} of ${d.customer?.key}`;
}

const lineColumns = (currency) => [
  { label: 'Line', cell: (l) => l.name },
  { label: 'Period', cell: (l) => period(l.period) },
  { label: 'Quantity', numeric: true, cell: (l) => l.quantity },
  { label: 'Amount', numeric: true, cell: (l) => money(l.amount, currency) },
];

const accessColumns = [
  { label: 'Feature', cell: (a) => h('code', {}, a.feature_key) },
  { label: 'Type', cell: (a) => a.type },
  { label: 'Access', cell: (a) => (a.has_access ? 'yes' : h('strong', { className: 'warning' }, 'no')) },
  { label: 'Usage', numeric: true, cell: (a) => a.usage ?? '–' },
  { label: 'Limit', numeric: true, cell: (a) => a.limit ?? '–' },
  { label: 'Usage period', cell: (a) => period(a.period) },
];

/** What one customer may use now and what it owes so far this period. */
async function customerDetails(box, customer) {
  show(box, h('p', {}, `Loading ${customer.key}…`));
  const ref = encodeURIComponent(customer.key);
  const [access, upcoming] = await Promise.allSettled([getJson(`/metering/customers/${ref}/entitlement-access`), getJson(`/metering/customers/${ref}/upcoming-invoice`)]);
  const invoice = () => {
    if (upcoming.status === 'rejected') return upcoming.reason instanceof ApiError && upcoming.reason.status === 404 ? h('p', {}, 'No upcoming invoice (no active subscription).') : failure(upcoming.reason);
    const i = upcoming.value;
    return [h('p', {}, `${period(i.period)}: ${money(i.totals.total, i.currency)} so far`), table(lineColumns(i.currency), i.lines, { empty: 'No lines' })];
  };
  show(
    box,
    h('h4', {}, `${customer.name ?? customer.key}: entitlements`),
    access.status === 'fulfilled' ? table(accessColumns, access.value.data, { empty: 'No entitlements' }) : failure(access.reason),
    h('h4', {}, 'Upcoming invoice'),
    invoice(),
  );
}

export default function startBilling(root) {
  const boxes = ['customers', 'subscriptions', 'invoices', 'customer-details', 'notifications'].map((id) => root.querySelector(`#${id}-table`));
  const [customersBox, subscriptionsBox, invoicesBox, detailsBox, notificationsBox] = boxes;
  every(POLL_MS, async () => {
    try {
      const [customers, subscriptions, invoices] = await Promise.all(['customers', 'subscriptions', 'invoices'].map((name) => meteringList(`/metering/${name}`)));
      const byId = new Map(customers.map((c) => [c.id, c]));
      const subscriptionOf = (c) => subscriptions.find((s) => s.customer.id === c.id && s.status === 'active') ?? subscriptions.findLast((s) => s.customer.id === c.id);
      const customerKey = (s) => byId.get(s.customer.id)?.key ?? s.customer.key ?? s.customer.id;
      show(customersBox, table(customerColumns(subscriptionOf), customers, { empty: 'No customers', onSelect: (c) => customerDetails(detailsBox, c), rowKey: (c) => c.key }));
      show(subscriptionsBox, table(subscriptionColumns(customerKey), subscriptions, { empty: 'No subscriptions' }));
      show(invoicesBox, table(invoiceColumns, invoices.toReversed(), { empty: 'No invoices yet' }));
    } catch (error) {
      show(customersBox, failure(error));
    }
    try {
      const events = await getJson(`/metering/api/v1/notification/events?pageSize=${NOTIFICATIONS_SHOWN}`);
      show(notificationsBox, table(notificationColumns, events.items, { empty: 'No notification events yet' }));
    } catch (error) {
      show(notificationsBox, failure(error));
    }
  });
}
