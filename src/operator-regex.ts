/**
 * Regular expressions an operator writes (route paths `~…`, header values `~*…`, CORS origins, collector
 * mappings' `/…/`) and a client's text runs through: compiled here for an engine that takes linear time
 * whatever the pattern. A backtracking engine (JS RegExp, as PCRE) does not: `(\w|\d)+$` took 2–3 s on a
 * 34-byte path, `(.*)/(.*)/(.*)/items$` 1.3 s on 1.2 KB, and no check of the pattern's shape can promise
 * better (the nested-quantifier check this replaced missed both).
 *
 * The engine is re2js, a JavaScript port of RE2: nothing to build at install, and on the router's short
 * paths faster than the native `re2` binding (whose strings cross into C++) or `re2-wasm`. Its dialect
 * is RE2's, which is PCRE's (Kong's) without what needs backtracking: named groups `(?<name>…)` and
 * `(?P<name>…)`, inline flags `(?i)`, classes, `\d \w \s \b`, lazy quantifiers are all there;
 * backreferences, lookahead, lookbehind, atomic groups and possessive quantifiers are refused at load,
 * with their position in the pattern.
 */
import { RE2JS, RE2JSSyntaxException } from 're2js';
import { RegexRefusedError } from './errors.ts';

/** re2js's anchor values (its RE2Flags, which it does not export). */
const UNANCHORED = 0;
const ANCHOR_START = 1;

export interface OperatorRegexOptions {
  /** Matches at the start of the text only (PCRE's "a" flag, ATC's prepended `^`), not necessarily to its end. */
  anchored: boolean;
  ignoreCase: boolean;
}

/** A match and its groups. */
export interface OperatorRegexMatch {
  /** Index 0 the whole match, then each group (undefined when it did not take part). */
  groups: (string | undefined)[];
  named: Record<string, string | undefined>;
}

type Re2 = ReturnType<RE2JS['re2']>;

export class OperatorRegex {
  private readonly groupCount: number;
  private readonly groupNames: [string, number][];

  constructor(
    /** The operator's pattern. */
    readonly source: string,
    readonly options: OperatorRegexOptions,
    private readonly re2: Re2,
  ) {
    this.groupCount = re2.numberOfCapturingGroups();
    this.groupNames = Object.entries(re2.namedGroups);
  }

  /** Whether the pattern matches (anywhere, or at the start when anchored): no groups, the fastest path. */
  test(text: string): boolean {
    return this.re2.match(text);
  }

  /** The leftmost match with its groups (at the start when anchored), or null. */
  exec(text: string): OperatorRegexMatch | null {
    // RE2's DFA answers whether it matches many times faster than the engines that find groups: most
    // regexes a router tries do not match.
    if (!this.re2.match(text)) return null;
    const anchor = this.options.anchored ? ANCHOR_START : UNANCHORED;
    const [found, positions] = this.re2.matchWithGroup(text, 0, text.length, anchor, this.groupCount + 1) as [boolean, number[] | null];
    if (!found || !positions) return null;
    const groups: (string | undefined)[] = [];
    for (let i = 0; i <= this.groupCount; i++) groups.push(positions[2 * i] < 0 ? undefined : text.slice(positions[2 * i], positions[2 * i + 1]));
    const named: Record<string, string | undefined> = {};
    for (const [name, index] of this.groupNames) named[name] = groups[index];
    return { groups, named };
  }
}

/** Compiles an operator's pattern, or throws RegexRefusedError saying what the engine cannot run and where. */
export function compileOperatorRegex(source: string, options: OperatorRegexOptions): OperatorRegex {
  const unsupported = backtrackingConstructOf(source);
  if (unsupported) throw new RegexRefusedError(`${unsupported.name} is not supported by the linear-time engine (RE2)`, unsupported.position);
  // The pattern alone first, so that `a)|(b` cannot close the anchoring group below and escape it.
  const alone = re2Of(source, options.ignoreCase);
  // Anchored at the start only: a `^(?:…)` RE2 sees, so that test() is anchored too.
  return new OperatorRegex(source, options, options.anchored ? re2Of(`^(?:${source})`, options.ignoreCase) : alone);
}

function re2Of(pattern: string, ignoreCase: boolean): Re2 {
  try {
    return RE2JS.compile(pattern, ignoreCase ? RE2JS.CASE_INSENSITIVE : 0).re2();
  } catch (err) {
    if (!(err instanceof RE2JSSyntaxException)) throw err;
    // RE2 names the offending text, not its offset: its first occurrence is where it starts.
    const reason = err.input ? `${err.error}: \`${err.input}\`` : err.error;
    throw new RegexRefusedError(reason, Math.max(0, err.input ? pattern.indexOf(err.input) : 0));
  }
}

/** undefined when the pattern compiles, else the refusal as a sentence (for configuration errors). */
export function operatorRegexProblem(source: string, options: OperatorRegexOptions): string | undefined {
  try {
    compileOperatorRegex(source, options);
    return undefined;
  } catch (err) {
    if (err instanceof RegexRefusedError) return err.message;
    throw err;
  }
}

/** PCRE and JS constructs RE2 leaves out, by the text that opens them (checked before RE2's own parse, whose messages are vaguer). */
const BACKTRACKING_GROUPS: [string, string][] = [
  ['(?<=', 'a lookbehind'],
  ['(?<!', 'a negative lookbehind'],
  ['(?=', 'a lookahead'],
  ['(?!', 'a negative lookahead'],
  ['(?>', 'an atomic group'],
  ['(?P=', 'a backreference'],
];

/** The first backreference or lookaround outside a character class, with its position. */
function backtrackingConstructOf(pattern: string): { name: string; position: number } | undefined {
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i];
    if (char === '\\') {
      const next = pattern[i + 1] ?? '';
      if (!inClass && (/[1-9]/.test(next) || (next === 'k' && /[<{']/.test(pattern[i + 2] ?? '')))) return { name: 'a backreference', position: i };
      i++;
    } else if (inClass) {
      if (char === ']') inClass = false;
    } else if (char === '[') {
      inClass = true;
      // A `]` first in a class (after an optional `^`) is a literal, as RE2 and PCRE read it.
      if (pattern[i + 1] === '^') i++;
      if (pattern[i + 1] === ']') i++;
    } else if (char === '(') {
      const found = BACKTRACKING_GROUPS.find(([opening]) => pattern.startsWith(opening, i));
      if (found) return { name: found[1], position: i };
    }
  }
  return undefined;
}
