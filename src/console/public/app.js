/**
 * The Tollgate console: the node at the top, then one section per concern, each reading the admin
 * API on its own schedule (live figures every two seconds, lists less often). The metering sections
 * (usage, billing, the metering queue) exist only on a gateway with a metering route: asked once, when
 * the page opens, from the plugins the node runs, so a gateway without one is never polled for them.
 */
import { every, getJson } from './api.js';
import { startBilling } from './billing.js';
import { startConsumers } from './consumers.js';
import { startDeadLetters } from './dead-letters.js';
import { failure, number, show } from './dom.js';
import { startMetering } from './metering.js';
import { startTraffic } from './traffic.js';
import { startUsage } from './usage.js';

const NODE_POLL_MS = 5_000;

function startNode(box) {
  every(NODE_POLL_MS, async () => {
    try {
      const [node, status] = await Promise.all([getJson('/'), getJson('/status')]);
      show(box, `${node.hostname} · tollgate ${node.version} · node ${node.node_id} · ${number(status.server.connections_active)} open connections`);
    } catch (error) {
      show(box, failure(error));
    }
  });
}

/** Whether a route runs the metering plugin; when the node cannot be read, the sections say why themselves. */
async function hasMetering() {
  try {
    return (await getJson('/')).plugins.enabled_in_cluster.includes('metering');
  } catch {
    return true;
  }
}

startNode(document.querySelector('#node'));
startTraffic(document.querySelector('#traffic'));
startConsumers(document.querySelector('#consumers'));
if (await hasMetering()) {
  startUsage(document.querySelector('#usage'));
  startBilling(document.querySelector('#billing'));
  startMetering(document.querySelector('#metering'));
} else {
  for (const element of document.querySelectorAll('[data-needs=metering]')) element.hidden = true;
}
startDeadLetters(document.querySelector('#dead-letters'));
