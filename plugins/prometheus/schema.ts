/** Kong's prometheus config (kong/plugins/prometheus/schema.lua): every field accepted, with Kong's defaults. */
import type { Infer, RecordSchema } from '../../src/pdk/index.ts';

const flag = { type: 'boolean', default: false } as const;

export const configSchema = {
  type: 'record',
  fields: {
    per_consumer: flag,
    status_code_metrics: flag,
    ai_metrics: flag,
    latency_metrics: flag,
    bandwidth_metrics: flag,
    upstream_health_metrics: flag,
    wasm_metrics: flag,
  },
} as const satisfies RecordSchema;

export type PrometheusConfig = Infer<typeof configSchema>;
