/**
 * Request metering's dead letters (`metering-and-billing` with an `ingest_endpoint`): events the
 * endpoint refused, or did not take within `max_retry_time`, kept until an operator re-delivers them
 * (back at the head of their queue) or deletes them. The only part of the console that changes
 * anything: each button is one admin call on one letter, and a deletion asks first.
 */
import { deletePath, every, kongList, postJson } from './api.js';
import { dateTime, failure, h, number, show, table } from './dom.js';

const POLL_MS = 5_000;
/** Rows drawn at most (the summary counts them all). */
const SHOWN = 200;
const PATH = '/metering-and-billing/dead-letters';

const CAUSES = { refused: 'refused by the endpoint', retry_time: 'not taken within max_retry_time' };

export function startDeadLetters(root) {
  const summary = root.querySelector('#dead-letters-summary');
  const box = root.querySelector('#dead-letters-table');
  const act = async (button, call) => {
    button.disabled = true;
    try {
      await call();
    } catch (error) {
      show(summary, failure(error));
    }
    refresh();
  };
  const actions = (letter) => {
    const path = `${PATH}/${encodeURIComponent(letter.id)}`;
    const redeliver = h('button', { type: 'button', title: 'send these events again, before the rest of the queue' }, 'Re-deliver');
    const remove = h('button', { type: 'button', className: 'danger', title: 'delete: these events will never be delivered' }, 'Delete');
    redeliver.addEventListener('click', () => act(redeliver, () => postJson(`${path}/redeliver`, {})));
    remove.addEventListener('click', () => {
      const question = `Delete ${letter.event_count} event(s) of queue ${letter.queue}? They will never be delivered.`;
      if (window.confirm(question)) act(remove, () => deletePath(path));
    });
    return h('span', { className: 'actions' }, redeliver, remove);
  };
  const columns = [
    { label: 'Queue', cell: (l) => h('code', {}, l.queue) },
    { label: 'Events', numeric: true, cell: (l) => number(l.event_count) },
    { label: 'Status', numeric: true, cell: (l) => l.status ?? 'no answer' },
    { label: 'Why', cell: (l) => CAUSES[l.cause] ?? l.cause },
    { label: 'Reason', cell: (l) => l.reason },
    { label: 'First failure', cell: (l) => dateTime(l.first_failure) },
    { label: 'Last failure', cell: (l) => dateTime(l.last_failure) },
    { label: '', cell: actions },
  ];
  const refresh = every(POLL_MS, async () => {
    try {
      const letters = await kongList(PATH);
      const events = letters.reduce((n, l) => n + l.event_count, 0);
      const more = letters.length > SHOWN ? `; the oldest ${number(SHOWN)} are listed` : '';
      show(summary, letters.length === 0 ? 'No dead letters.' : `${number(letters.length)} dead letters holding ${number(events)} events${more}.`);
      show(box, table(columns, letters.slice(0, SHOWN), { empty: 'Nothing refused or given up: every event went through', rowKey: (l) => l.id }));
    } catch (error) {
      show(box, failure(error));
    }
  });
}
