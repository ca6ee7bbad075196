/**
 * "Did you mean ...?" for names an operator typed: config fields, plugin names, command-line options
 * and commands. The closest known name by edit distance (insertions, deletions, substitutions and
 * swaps of two neighbours), if it is close enough to be a typo.
 */

/** A shorter word is too little to be a cut-short name. */
const MIN_PREFIX_LENGTH = 3;
/** Longer words are not typos of our names (the longest is under 40): no work proportional to them. */
const MAX_WORD_LENGTH = 64;

/**
 * One edit per four characters, from one to three: `metring` -> `metering` and `admin_listn` ->
 * `admin_listen`, but not `oauth2` -> `auth` nor `persistent_refresh_token` -> `reuse_refresh_token`.
 */
function allowedDistance(word: string): number {
  return Math.min(3, Math.max(1, Math.floor(word.length / 4)));
}

/**
 * Optimal string alignment distance, or `limit + 1` as soon as it must exceed `limit` (each row's
 * minimum never decreases), so a hopeless candidate costs little.
 */
export function editDistance(a: string, b: string, limit = Infinity): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let beforePrevious: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, beforePrevious[j - 2] + 1);
      current.push(d);
      rowMin = Math.min(rowMin, d);
    }
    if (rowMin > limit) return limit + 1;
    beforePrevious = previous;
    previous = current;
  }
  return previous[b.length];
}

/**
 * The known name closest to `word` within typo distance (case-insensitive), else the only one that
 * begins with it (`--conf` -> `--config`), else undefined.
 */
export function closestName(word: string, known: Iterable<string>): string | undefined {
  if (word.length === 0 || word.length > MAX_WORD_LENGTH) return undefined;
  const lower = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = allowedDistance(word) + 1;
  const extending: string[] = [];
  for (const name of known) {
    if (name === word) continue;
    const candidate = name.toLowerCase();
    const distance = editDistance(lower, candidate, bestDistance - 1);
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
    if (word.length >= MIN_PREFIX_LENGTH && candidate.startsWith(lower)) extending.push(name);
  }
  return best ?? (extending.length === 1 ? extending[0] : undefined);
}

/** `; did you mean 'x'?` to append to a message, or '' when nothing is close. */
export function didYouMean(word: string, known: Iterable<string>): string {
  const name = closestName(word, known);
  return name === undefined ? '' : `; did you mean '${name}'?`;
}
