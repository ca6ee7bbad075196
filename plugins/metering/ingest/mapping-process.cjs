/**
 * The collector mapping process (mapping-worker.ts starts it, one per gateway process): evaluates the
 * JSONata mappings of the batches it is sent, with RE2 for their regular expressions, and answers each
 * batch with its results as JSON text. Plain CommonJS run by node as it is: it inherits neither the
 * TypeScript loader nor the gateway's bundle. Its settings (module paths among them) come as its one
 * argument. JSONata's `RegexEngine` is given RE2 through the shape JSONata uses of a RegExp (`exec` from
 * `lastIndex`, the match with its `index`).
 */
'use strict';
const settings = JSON.parse(process.argv[2]);
const jsonata = require(settings.jsonata);
const { RE2JS } = require(settings.re2js);
const { maxDepth, maxSequence, maxEventBytes, maxEvents } = settings;

class LinearRegExp {
  constructor(pattern, flags) {
    const source = typeof pattern === 'string' ? pattern : pattern.source;
    const given = (typeof pattern === 'string' ? flags : pattern.flags) || '';
    const re2Flags = (given.includes('i') ? RE2JS.CASE_INSENSITIVE : 0) | (given.includes('m') ? RE2JS.MULTILINE : 0);
    try {
      this.re2 = RE2JS.compile(source, re2Flags).re2();
    } catch (err) {
      throw { code: 'TG0001', message: 'the regular expression /' + source + '/ is refused: ' + err.message };
    }
    this.source = source;
    this.groupCount = this.re2.numberOfCapturingGroups();
    this.lastIndex = 0;
  }
  exec(text) {
    const [found, positions] = this.re2.matchWithGroup(text, this.lastIndex, text.length, 0, this.groupCount + 1);
    if (!found) {
      this.lastIndex = 0;
      return null;
    }
    const match = [];
    for (let i = 0; i <= this.groupCount; i++) match.push(positions[2 * i] < 0 ? undefined : text.slice(positions[2 * i], positions[2 * i + 1]));
    match.index = positions[0];
    this.lastIndex = positions[1];
    return match;
  }
}

const expressions = new Map();
function expressionOf(mapping, timeoutMs) {
  const key = timeoutMs + '\n' + mapping;
  let expression = expressions.get(key);
  if (!expression) {
    if (expressions.size >= 1000) expressions.clear();
    expression = jsonata(mapping, { timeout: timeoutMs, stack: maxDepth, sequence: maxSequence, RegexEngine: LinearRegExp });
    expressions.set(key, expression);
  }
  return expression;
}

function tooLarge(message) {
  return { code: 'COLLECTOR_TOO_LARGE', message };
}

/** The output as JSON text, each event within its size. */
function serialize(output) {
  if (output === undefined) return { json: null, bytes: 0 };
  const events = Array.isArray(output) ? output : [output];
  if (events.length > maxEvents) throw { code: 'COLLECTOR_INVALID_RESULT', message: 'the mapping yields ' + events.length + ' events, more than ' + maxEvents };
  let bytes = 0;
  const parts = events.map((event, index) => {
    const json = JSON.stringify(event) ?? 'null';
    const size = Buffer.byteLength(json);
    if (size > maxEventBytes) throw tooLarge('the mapping yields an event of ' + size + ' bytes at [' + index + '], more than ' + maxEventBytes);
    bytes += size;
    return json;
  });
  return { json: Array.isArray(output) ? '[' + parts.join(',') + ']' : parts[0], bytes };
}

/** Reports the evaluation starting, at most twice a budget (not per event: a message costs more than an evaluation). */
let reportedAt = 0;
function report(index, timeoutMs) {
  const now = Date.now();
  if (now - reportedAt < timeoutMs / 2) return;
  reportedAt = now;
  process.send({ started: index });
}

async function runBatch({ jobs, timeoutMs, maxTotalBytes }) {
  const outputs = [];
  let total = 0;
  for (let index = 0; index < jobs.length; index++) {
    report(index, timeoutMs);
    try {
      const { json, bytes } = serialize(await expressionOf(jobs[index].mapping, timeoutMs).evaluate(jobs[index].input));
      total += bytes;
      if (total > maxTotalBytes) throw tooLarge('the mappings of this request yield ' + total + ' bytes of events, more than max_body_size (' + maxTotalBytes + ')');
      outputs.push(json);
    } catch (err) {
      return { outputs, failure: { index, code: err && err.code, message: (err && err.message) || String(err) } };
    }
  }
  return { outputs };
}

/** One batch after the other, answered in the order they came. */
let previous = Promise.resolve();
process.on('message', (batch) => {
  previous = previous.then(() => runBatch(batch)).then((results) => process.send(results));
});
// The gateway is gone (even by kill -9): so is its mapping process.
process.on('disconnect', () => process.exit(0));
process.send('ready');
