#!/usr/bin/env node
import { UsageError } from './usage-error.js';
import { exitAfterLogs } from '../log-exit.js';
import { printable } from '../text/printable.js';
import { holdSignals } from '../cluster/held-signals.js';

const USAGE = `Usage: gateway <command> [options]

Commands:
  start     run the gateway (primary + workers)
  routes    print the routing table compiled from a config and/or doc files
  explain   show which endpoint a request would be routed to, and why
  hash-key  print the SHA-256 digest of an API key read on stdin (for apiKeyAuth)
  check     validate a config (and with --fetch every upstream doc), like nginx -t

Run "gateway <command> --help" (or "gateway --help <command>") for a command's options.`;

/** Exit codes: 0 ok, 1 the command failed, 2 the command line was wrong. */
const EXIT_USAGE = 2;

type Command = (argv: string[]) => Promise<number>;

// Each command is loaded on demand: nothing one imports can keep another from working, and a quick
// command (hash-key, check, --version) does not pay for start's primary, logger and cluster modules.
const commands: Record<string, () => Promise<Command>> = {
  start: async () => (await import('./start.js')).runStart,
  routes: async () => (await import('./routes.js')).runRoutes,
  explain: async () => (await import('./explain.js')).runExplain,
  'hash-key': async () => (await import('./hash-key.js')).runHashKey,
  check: async () => (await import('./check.js')).runCheck,
  '--version': async () => (await import('./version.js')).runVersion,
};

function isUsageError(err: unknown): boolean {
  return err instanceof UsageError || (err as { code?: unknown } | null)?.code?.toString().startsWith('ERR_PARSE_ARGS') === true;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  // Before anything is loaded: a gateway being started is signalled like a running one (src/cluster/held-signals.ts).
  if (name === 'start') holdSignals();
  if (name === undefined) {
    console.error(USAGE);
    return EXIT_USAGE;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    // `gateway --help start` is start's help, as `gateway start --help` is.
    if (rest.length === 0) {
      console.log(USAGE);
      return 0;
    }
    if (rest.length > 1 || commands[rest[0]!] === undefined || rest[0] === '--version') {
      console.error(`gateway: --help takes one command, one of ${Object.keys(commands).filter((c) => c !== '--version').join(', ')}; got "${printable(rest.join(' '))}"\n\n${USAGE}`);
      return EXIT_USAGE;
    }
    return main([rest[0]!, '--help']);
  }
  const load = commands[name];
  if (!load) {
    console.error(`gateway: unknown command "${printable(name)}"\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  let command: Command;
  try {
    command = await load();
  } catch (err) {
    console.error(`gateway ${name}: this command is not available in this build (${(err as Error).message})`);
    return 1;
  }
  try {
    return await command(rest);
  } catch (err) {
    if (isUsageError(err)) {
      const help = name === '--version' ? 'gateway --help' : `gateway ${name} --help`;
      console.error(`gateway ${name}: ${printable((err as Error).message)}\nRun "${help}" for usage.`);
      return EXIT_USAGE;
    }
    throw err;
  }
}

main(process.argv.slice(2)).then(
  (code) => exitAfterLogs(code),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
