/**
 * The shell blocks of a Markdown document, as the doc runner executes them: fenced blocks whose info
 * string starts with `sh`, `bash` or `shell`. Words after the language are flags:
 *   `no-run`      not executed (commands that cannot run unattended, e.g. `npm test` inside the tests);
 *   `background`  each command is a long-running program of its own (a "terminal": a gateway, an
 *                 upstream): started in the background, waited for until it prints `listening on`,
 *                 stopped after the document.
 */
export interface ShellBlock {
  file: string;
  /** The line of the opening fence (1-based). */
  line: number;
  flags: string[];
  code: string;
}

const SHELLS = new Set(['sh', 'bash', 'shell']);
const FENCE = /^ {0,3}(`{3,}|~{3,})\s*(.*)$/;

export function shellBlocks(markdown: string, file: string): ShellBlock[] {
  const blocks: ShellBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]);
    if (!open) continue;
    const [, fence, info] = open;
    const end = lines.findIndex((l, j) => j > i && l.trim().startsWith(fence[0].repeat(fence.length)) && l.trim().replaceAll(fence[0], '') === '');
    const close = end === -1 ? lines.length : end;
    const [language = '', ...flags] = info.trim().split(/\s+/);
    if (SHELLS.has(language)) blocks.push({ file, line: i + 1, flags, code: lines.slice(i + 1, close).join('\n') + '\n' });
    i = close;
  }
  return blocks;
}

/** The commands of a `background` block: one per line, comments and blank lines left out. */
export function backgroundCommands(block: ShellBlock): string[] {
  return block.code.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
}
