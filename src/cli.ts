/**
 * The `tollgate` command line: `tollgate <command> [options]` (see src/cli/commands.ts).
 * Run by the package's bin (bin/tollgate.js, also behind the npm scripts), bundled or through tsx.
 */
import { runCli } from './cli/commands.ts';
import { flushLogs } from './log.ts';

const code = await runCli(process.argv.slice(2));
flushLogs();
process.exit(code);
