/**
 * The `tollgate` command line: `tollgate <command> [options]` (see src/cli/commands.ts).
 * Run by the package's bin (bin/tollgate.js, also behind the npm scripts), bundled or through tsx.
 * The one reader of the bundled plugin list: every command, and what it starts, gets it from here.
 */
import { runCli } from './cli/commands.ts';
import { flushLogs } from './log.ts';
import { bundledPlugins } from './plugins.ts';

const code = await runCli(process.argv.slice(2), bundledPlugins);
flushLogs();
process.exit(code);
