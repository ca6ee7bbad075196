/**
 * Ingestion, whatever the HTTP mapping (v3 `POST /events`, v1 `POST /api/v1/events`, a webhook at
 * `POST /collectors/{name}/events`): bodies decoded, events passed through the collectors that match
 * them, validated, and committed by the writer. Nothing of a request is stored unless all of it is valid.
 */
import { decodeEvents, prepareEvents, type ValidationContext } from './events.ts';
import type { PreparedEvent } from '../shared/events.ts';
import { BodyError, CollectorError, invalidEvents, tooManyEvents, type InvalidParameter } from '../shared/errors.ts';
import type { Collectors, CompiledCollector } from './collectors.ts';
import type { MeterRegistry } from '../meter/port.ts';

/** The settings of a metering instance that ingestion applies (of its MeteringConfig). */
export interface IngestSettings {
  retention_days: number;
  max_events_per_request: number;
  max_body_size: number;
  queue_max_events: number;
}

/** Where ingestion commits events, and the meters that will count them (the metering service). */
export interface EventSink {
  readonly meters: Pick<MeterRegistry, 'aggregating'>;
  /** Resolves once every event is durable (or was a duplicate); refused while `queue_max_events` wait. */
  ingest(events: PreparedEvent[], settings: Pick<IngestSettings, 'queue_max_events'>): Promise<void>;
}

/** An event to validate, with where it came from (for the error that names it). */
interface Candidate {
  event: unknown;
  /** Its index in the request body. */
  index: number;
  collector?: string;
}

export class Ingestion {
  constructor(
    private readonly service: EventSink,
    readonly collectors: Collectors,
  ) {}

  private context(config: IngestSettings, mayHoldLoneSurrogates: boolean): ValidationContext {
    const now = Date.now();
    return {
      now,
      retentionStart: Math.floor(now / 1000) - config.retention_days * 86_400,
      retentionDays: config.retention_days,
      metersOf: (type) => this.service.meters.aggregating(type),
      mayHoldLoneSurrogates,
    };
  }

  /** A body of CloudEvents (`POST /events`): resolves once every event is durable. */
  async events(contentType: string | undefined, body: Buffer, config: IngestSettings): Promise<void> {
    const { events, batch, mayHoldLoneSurrogates } = decodeEvents(contentType, body);
    this.checkCount(events.length, config);
    const context = this.context(config, mayHoldLoneSurrogates);
    const candidates = await this.throughCollectors(events, config);
    // The usual case, no collector matched: one validation pass with the body's own indices.
    const prepared = candidates ? this.prepareEach(candidates, batch, context) : prepareEvents(events, batch, context);
    if (prepared.length > 0) await this.service.ingest(prepared, config);
  }

  /** A webhook body (any JSON) through the collector `name`, which has no `match`. */
  async webhook(collector: CompiledCollector, body: unknown, config: IngestSettings): Promise<void> {
    const [events] = await this.collectors.run([{ collector, input: body }], config.max_body_size);
    this.checkCount(events.length, config);
    const candidates = events.map((event, index) => ({ event, index, collector: collector.record.name }));
    const prepared = this.prepareEach(candidates, true, this.context(config, true));
    if (prepared.length > 0) await this.service.ingest(prepared, config);
  }

  private checkCount(count: number, config: IngestSettings): void {
    if (count > config.max_events_per_request) throw tooManyEvents(config.max_events_per_request, count);
  }

  /** The events with the matching collectors applied; undefined when none matched. */
  private async throughCollectors(events: unknown[], config: IngestSettings): Promise<Candidate[] | undefined> {
    const collectors = events.map((event) => this.collectors.matching(event));
    const jobs = events.flatMap((input, index) => (collectors[index] ? [{ collector: collectors[index], input }] : []));
    if (jobs.length === 0) return undefined;
    const mapped = (await this.collectors.run(jobs, config.max_body_size)).values();
    return events.flatMap((event, index): Candidate[] => {
      const collector = collectors[index];
      if (!collector) return [{ event, index }];
      return mapped.next().value!.map((output) => ({ event: output, index, collector: collector.record.name }));
    });
  }

  /**
   * Validates each event alone, so that a problem names the collector whose mapping produced the event;
   * throws listing every problem (a collector's first), else returns the prepared events.
   */
  private prepareEach(candidates: Candidate[], batch: boolean, context: ValidationContext): PreparedEvent[] {
    const prepared: PreparedEvent[] = [];
    const problems: InvalidParameter[] = [];
    let fromCollector: { collector: string; problem: InvalidParameter } | undefined;
    for (const { event, index, collector } of candidates) {
      try {
        prepared.push(...prepareEvents([event], false, context));
      } catch (err) {
        if (!(err instanceof BodyError)) throw err;
        for (const p of err.invalidParameters ?? []) {
          const field = `${batch ? `[${index}]` : ''}${collector ? `(collector ${collector})` : ''}${p.field === 'body' ? '' : `${batch || collector ? '.' : ''}${p.field}`}`;
          const problem = { ...p, field, index };
          problems.push(problem);
          if (collector) fromCollector ??= { collector, problem };
        }
      }
    }
    if (fromCollector) {
      const { collector, problem } = fromCollector;
      throw new CollectorError('COLLECTOR_INVALID_EVENT', collector, `the mapping yields an invalid event: ${problem.field}: ${problem.reason}`);
    }
    if (problems.length > 0) throw invalidEvents(problems, candidates.length);
    return prepared;
  }
}
