/** Kong's prometheus config (kong/plugins/prometheus/schema.lua): every field accepted, with Kong's defaults. */
import type { RecordSchema } from '../../src/pdk/index.ts';

export interface PrometheusConfig {
  per_consumer: boolean;
  status_code_metrics: boolean;
  ai_metrics: boolean;
  latency_metrics: boolean;
  bandwidth_metrics: boolean;
  upstream_health_metrics: boolean;
  wasm_metrics: boolean;
}

const flag = { type: 'boolean', default: false } as const;

export const configSchema: RecordSchema = {
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
};
