/**
 * The `tollgate` command line: `tollgate start|check|version|help [options]` (see src/cli/commands.ts).
 * Run as the package's bin, or by npm scripts as `node --import tsx src/cli.ts <command>`.
 */
import { runCli } from './cli/commands.ts';
import { flushLogs } from './log.ts';

const code = await runCli(process.argv.slice(2));
flushLogs();
process.exit(code);
