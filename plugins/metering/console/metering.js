/**
 * The metering writer's ingest queue (producers get 503 when it is full), the backfills of meters
 * created after their events, and what meters could not take of the events they count (a value missing
 * or invalid), from the admin API's `/metering/status`.
 *
 * A console tab of the metering plugin (index.ts): the page loads it from
 * `/console/<build>/plugins/metering/`, so `../../` names the console's own modules.
 */
import { every, getJson } from '../../api.js';
import { failure, h, number, percent, show, table } from '../../dom.js';

const POLL_MS = 2_000;

const REASONS = {
  value_missing: 'no value: left out of the sum, average, min, max or latest',
  value_invalid: 'value not a number (or out of range): left out of the sum, average, min, max or latest',
};

const rejectionColumns = [
  { label: 'Meter', cell: (r) => h('code', {}, r.meter) },
  { label: 'What the meter could not take', cell: (r) => REASONS[r.reason] ?? r.reason },
  { label: 'Events', numeric: true, cell: (r) => number(r.events) },
];

const backfillColumns = [
  { label: 'Meter', cell: (b) => h('code', {}, b.meter.key) },
  { label: 'Progress', cell: (b) => h('progress', { max: 1, value: b.ratio, title: percent(b.ratio) }) },
  { label: '', numeric: true, cell: (b) => percent(b.ratio) },
  { label: 'Events aggregated', numeric: true, cell: (b) => number(b.aggregated_events) },
];

export default function startMetering(root) {
  const box = root.querySelector('#metering-status');
  every(POLL_MS, async () => {
    try {
      const status = await getJson('/metering/status');
      const { events, max_events: max } = status.queue;
      show(
        box,
        h('dl', { className: 'facts' },
          h('dt', {}, 'Ingest queue'),
          h('dd', {}, h('progress', { max, value: events }), ` ${number(events)} of ${number(max)} events waiting for their commit`),
          h('dt', {}, 'Meters'),
          h('dd', {}, number(status.meters)),
          h('dt', {}, 'Dedupe filter'),
          h('dd', {}, `${number(status.dedupe_filter.hashes)} event ids, ${number(status.dedupe_filter.bytes / 1024)} KiB`),
        ),
        h('h3', {}, 'Backfills'),
        table(backfillColumns, status.backfills, { empty: 'No backfill running: every meter covers every stored event' }),
        h('h3', {}, 'Values meters could not take'),
        table(rejectionColumns, status.rejected_values, { empty: 'None: every meter took every value of the events it counts' }),
      );
    } catch (error) {
      show(box, failure(error));
    }
  });
}
