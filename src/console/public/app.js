/**
 * The Tollgate console: the node at the top, then one section per concern, each reading the admin
 * API on its own schedule (live figures every two seconds, lists less often). The sections plugins
 * add (`data-needs` their plugin, e.g. metering's usage, billing and queue) exist only on a gateway
 * that runs the plugin: asked once, when the page opens, from the plugins the node runs, so a gateway
 * without it is never polled for them, and their scripts are never loaded.
 */
import { every, getJson } from './api.js';
import { startConsumers } from './consumers.js';
import { startDeadLetters } from './dead-letters.js';
import { failure, number, show } from './dom.js';
import { startTraffic } from './traffic.js';

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

/** The plugins the node runs; every plugin when the node cannot be read (the sections then say why themselves). */
async function pluginsInUse() {
  try {
    const plugins = (await getJson('/')).plugins.enabled_in_cluster;
    return (name) => plugins.includes(name);
  } catch {
    return () => true;
  }
}

/** A plugin's section, started by the default export of its module (`data-script`). */
async function startPluginTab(section) {
  try {
    const { default: start } = await import(section.dataset.script);
    start(section);
  } catch (error) {
    show(section, failure(error));
  }
}

startNode(document.querySelector('#node'));
startTraffic(document.querySelector('#traffic'));
startConsumers(document.querySelector('#consumers'));
const inUse = await pluginsInUse();
for (const element of document.querySelectorAll('[data-needs]')) {
  if (!inUse(element.dataset.needs)) element.hidden = true;
  else if (element.dataset.script) void startPluginTab(element);
}
startDeadLetters(document.querySelector('#dead-letters'));
