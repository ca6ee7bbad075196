/**
 * A character trie over the prefix paths of all matchers: one walk along the request path finds every matcher whose
 * prefix the path starts with, so a miss costs O(path length) instead of one startsWith per route.
 */

interface TrieNode {
  next: Map<number, TrieNode>;
  /** Matchers whose prefix ends at this node. */
  matcherIndexes: number[];
  prefix: string;
}

function newNode(prefix: string): TrieNode {
  return { next: new Map(), matcherIndexes: [], prefix };
}

export class PrefixIndex {
  private readonly root = newNode('');
  /** marks[i] === the current generation when matcher i's prefix matched the current path. */
  private readonly marks: Float64Array;
  private readonly matchedPrefixes: string[];
  private generation = 0;

  constructor(matcherCount: number) {
    this.marks = new Float64Array(matcherCount);
    this.matchedPrefixes = new Array<string>(matcherCount).fill('');
  }

  add(prefix: string, matcherIndex: number): void {
    let node = this.root;
    for (let i = 0; i < prefix.length; i++) {
      const code = prefix.charCodeAt(i);
      let child = node.next.get(code);
      if (child === undefined) {
        child = newNode(prefix.slice(0, i + 1));
        node.next.set(code, child);
      }
      node = child;
    }
    node.matcherIndexes.push(matcherIndex);
  }

  /** Marks every matcher whose prefix starts the path; read the result with prefixFor() until the next call. */
  collect(path: string): void {
    const generation = ++this.generation;
    let node: TrieNode | undefined = this.root;
    for (let i = 0; node !== undefined; i++) {
      for (const index of node.matcherIndexes) {
        this.marks[index] = generation;
        this.matchedPrefixes[index] = node.prefix;
      }
      if (i === path.length) break;
      node = node.next.get(path.charCodeAt(i));
    }
  }

  /** The prefix of matcher `index` that starts the last collected path, or null. */
  prefixFor(index: number): string | null {
    return this.marks[index] === this.generation ? this.matchedPrefixes[index] : null;
  }
}
