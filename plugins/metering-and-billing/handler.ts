/**
 * The runtime: one queue per plugin instance (or per `queue.name`, shared as in Kong), the AI usage
 * readers set up in the response phase, and the events built in the log phase.
 */
import type { PluginApi, PluginRuntime } from '../../src/pdk/index.ts';
import { reservationOf, type LocalIngest } from '../metering/public.ts';
import { usageReaderFor, type UsageReader } from './ai-usage.ts';
import { deadLetterAdminRoutes } from './dead-letter-admin.ts';
import { DeadLetterStore } from './dead-letters.ts';
import { apiRequestEvent, llmRequestEvents, startedAtMs, subjectOf, type MeteringEvent } from './events.ts';
import { LocalQueue } from './local-queue.ts';
import { RequestMeteringMetrics } from './metrics.ts';
import type { EventQueue } from './queue.ts';
import { RemoteQueue } from './remote-queue.ts';
import type { RequestMeteringConfig } from './schema.ts';

/** Where the response phase leaves a request's usage reader for the log phase. */
const USAGE = 'metering-and-billing:usage';

export function createRuntime(api: PluginApi): PluginRuntime<RequestMeteringConfig> {
  const source = `tollgate/${api.nodeId}`;
  const queues = new Map<string, EventQueue>();
  /** The queue of each instance's config object (the log phase gets the config, not the instance). */
  let queueOf = new WeakMap<RequestMeteringConfig, EventQueue>();
  const deadLetters = new DeadLetterStore(api.store);
  const metrics = new RequestMeteringMetrics(api.metrics, () => [...queues.values()].map((q) => q.depth()), () => deadLetters.heldCounts());
  let ingest: LocalIngest | undefined;

  const open = async (name: string, config: RequestMeteringConfig): Promise<EventQueue> => {
    if (!config.ingest_endpoint) return new LocalQueue(name, config.queue, () => ingest, metrics, api.log);
    const queue = new RemoteQueue(name, api.store, config, deadLetters, metrics, api.log);
    await queue.start();
    return queue;
  };

  return {
    adminRoutes: deadLetterAdminRoutes({
      letters: deadLetters,
      queueNamed: (name) => {
        const queue = queues.get(name);
        return queue instanceof RemoteQueue ? queue : undefined;
      },
      metrics,
      log: api.log,
    }),

    async configure(view) {
      ingest = api.services.get<LocalIngest>('metering.ingest');
      const wanted = new Map<string, RequestMeteringConfig>();
      for (const instance of view.instances) wanted.set(instance.config.queue.name ?? instance.id, instance.config);
      for (const [name, queue] of queues) {
        const next = wanted.get(name);
        // A queue that went away, or switched between this gateway's store and a remote endpoint, hands over what it holds first.
        if (!next || (queue instanceof RemoteQueue) !== Boolean(next.ingest_endpoint)) {
          queues.delete(name);
          await queue.close();
        }
      }
      for (const [name, config] of wanted) {
        const queue = queues.get(name);
        if (queue) queue.reconfigure(config);
        else queues.set(name, await open(name, config));
      }
      queueOf = new WeakMap(view.instances.map((i) => [i.config, queues.get(i.config.queue.name ?? i.id)!]));
    },

    // Nothing served goes unbilled: while the store refuses writes (a full disk) a request whose usage
    // could not be recorded is refused before it reaches the upstream.
    access(ctx, config) {
      if (queueOf.get(config)?.cannotRecord) ctx.error(503, 'usage cannot be recorded right now (storage is full or failing); retry later', { 'retry-after': '10' });
    },

    response(ctx, config, response) {
      // Completions (chat, text, embeddings, responses) are POSTs: other requests cost no reading at all.
      if (!config.meter_ai_token_usage || ctx.method !== 'POST' || !response.observeBody || response.status < 200 || response.status >= 300) return;
      const reader = usageReaderFor(response.headers['content-type'], response.headers['content-encoding']);
      if (!reader) return;
      response.observeBody(reader.observe);
      ctx.shared[USAGE] = reader;
    },

    log(ctx, config) {
      const queue = queueOf.get(config);
      if (!queue) return;
      // Only what was served is usage: the gateway's own answers (refusals, an unreachable upstream) are not.
      if (!config.meter_gateway_answers && !ctx.outcome.answeredByUpstream) return void metrics.gatewayAnswers.inc({ route: ctx.route.name ?? ctx.route.id });
      const subject = subjectOf(ctx, config.subject);
      if (!subject) return void metrics.noSubject.inc({ route: ctx.route.name ?? ctx.route.id });
      const endedAt = performance.now();
      const time = new Date(startedAtMs(ctx)).toISOString();
      const events: MeteringEvent[] = [];
      if (config.meter_api_requests) {
        events.push(apiRequestEvent(ctx, config, subject, source, time, endedAt));
        metrics.events.inc({ type: 'kong.api_request' });
      }
      const usage = config.meter_ai_token_usage ? (ctx.shared[USAGE] as UsageReader | undefined)?.result() : undefined;
      if (usage) {
        events.push(...llmRequestEvents(ctx, config, subject, source, time, usage));
        metrics.events.inc({ type: 'kong.llm_request' }, 2);
      }
      if (events.length === 0) return;
      queue.add(events);
      // An entitlement's reservation is settled with what these events add to its meter, when they go to this gateway's store.
      if (queue instanceof LocalQueue) reservationOf(ctx)?.metered(events);
    },

    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
    },
  };
}
