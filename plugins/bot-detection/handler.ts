/**
 * Refuses clients by User-Agent (Kong's bot-detection handler.lua): an agent matching `allow` passes; one
 * matching `deny`, or Kong's list of known bots, gets 403. A request without a User-Agent passes; one
 * with two is refused with 400. Verdicts are cached per instance by agent, as Kong's per-worker LRU.
 */
import { LRUCache } from 'lru-cache';
import { compileOperatorRegex, headerValues, type OperatorRegex, type PluginRuntime } from '../../src/pdk/index.ts';
import { BOT_PATTERNS } from './rules.ts';
import { USER_AGENT_REGEX, type BotDetectionConfig } from './schema.ts';

/** Kong's UA_CACHE_SIZE: distinct agents remembered per instance. */
const VERDICT_CACHE_SIZE = 10_000;

/** Compiled once for every instance: the list does not depend on the config. */
const KNOWN_BOTS = BOT_PATTERNS.map(compile);

export interface Detector {
  allow: OperatorRegex[];
  deny: OperatorRegex[];
  /** Agent → whether it is refused. */
  verdicts: LRUCache<string, boolean>;
}

function compile(pattern: string): OperatorRegex {
  return compileOperatorRegex(pattern, USER_AGENT_REGEX);
}

export function prepareDetector(config: BotDetectionConfig): Detector {
  return { allow: config.allow.map(compile), deny: config.deny.map(compile), verdicts: new LRUCache({ max: VERDICT_CACHE_SIZE }) };
}

/** Allowed first, then denied, then the known bots; Kong strips the agent's surrounding spaces first. */
function refused(detector: Detector, userAgent: string): boolean {
  const agent = userAgent.trim();
  const matches = (regex: OperatorRegex) => regex.test(agent);
  if (detector.allow.some(matches)) return false;
  return detector.deny.some(matches) || KNOWN_BOTS.some(matches);
}

function cachedVerdict(detector: Detector, userAgent: string): boolean {
  let verdict = detector.verdicts.get(userAgent);
  if (verdict === undefined) {
    verdict = refused(detector, userAgent);
    detector.verdicts.set(userAgent, verdict);
  }
  return verdict;
}

export function createRuntime(): PluginRuntime<BotDetectionConfig, Detector> {
  return {
    access(ctx, _config, plugin) {
      const agents = headerValues(ctx, 'user-agent');
      if (agents.length > 1) return ctx.error(400, 'Only one User-Agent header allowed');
      if (agents.length === 0) return;
      if (cachedVerdict(plugin.prepared, agents[0])) ctx.error(403, 'Forbidden');
    },
  };
}
